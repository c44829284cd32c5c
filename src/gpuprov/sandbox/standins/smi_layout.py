"""The layout of nvidia-smi's summary table per driver branch, as the recordings in tests/recorded/nvidia-smi/
show it (see its SOURCES.md):

- 535 draws the table 89 columns wide, its middle column 22 wide: the bus id is not indented, power reads
  `60W / 300W`, memory `8722MiB / 23028MiB`, and the driver version field of the header is 12 wide.
- 550 widened the table to 91 columns and the middle column to 24 (bus id indented by 2, `145W /  700W`).
- 570 widened the PID column of the Processes block and narrowed the process name.
- 580 draws the line under the driver header with `+` corners.

The fixed parts come out as text; the per-GPU rows as printf formats that nvidia-smi.sh fills in.
"""

from __future__ import annotations

from dataclasses import dataclass

LEFT, RIGHT = 41, 22  # inner widths of the first and last column; the middle one changed with 550
EMPTY_LINE = " " * 89  # the padded empty line between the two tables, the same in 535, 550 and 570


@dataclass(frozen=True)
class SmiLayout:
    branch: int

    @property
    def middle(self) -> int:
        return 22 if self.branch < 550 else 24

    @property
    def width(self) -> int:
        """Inner width of the whole table, between its outer borders."""
        return LEFT + self.middle + RIGHT + 2

    def top(self) -> str:
        return "+" + "-" * self.width + "+"

    def header_format(self) -> str:
        """printf format of the header line, for the driver version (twice) and the CUDA version."""
        driver = 12 if self.branch < 550 else 14
        return f"| NVIDIA-SMI %-22s Driver Version: %-{driver}s CUDA Version: %-8s |"

    def head(self) -> str:
        """The column titles, from the line under the driver header to the double line."""
        bus = "Bus-Id        Disp.A" if self.branch < 550 else "Bus-Id          Disp.A"
        corners = "++++" if self.branch >= 580 else "|+++"
        rows = [
            (("-" * LEFT, "-" * self.middle, "-" * RIGHT), corners),
            ((" GPU  Name                 Persistence-M", f" {bus}", " Volatile Uncorr. ECC"), "||||"),
            (
                (
                    " Fan  Temp   Perf          Pwr:Usage/Cap",
                    f" {'Memory-Usage':>{self.middle - 2}}",
                    " GPU-Util  Compute M.",
                ),
                "||||",
            ),
            (("", "", "               MIG M."), "||||"),
            (("=" * LEFT, "=" * self.middle, "=" * RIGHT), "|++|"),
        ]
        m = self.middle
        return "\n".join(f"{c[0]}{a:<{LEFT}}{c[1]}{b:<{m}}{c[2]}{d:<{RIGHT}}{c[3]}" for (a, b, d), c in rows)

    def gpu_formats(self) -> tuple[str, str, str, str]:
        """printf formats of a GPU's block: index, name, persistence, bus id, display; power and memory;
        the MIG line; the closing border."""
        if self.branch < 550:
            name = "| %3d  %-30.30s %-3s | %16s %3s | %20s |"
            usage = "| N/A   30C    P0%17s / %4s |%10s / %8s |%8s %12s |"
        else:
            name = "| %3d  %-30.30s %-3s | %18s %3s | %20s |"
            usage = "| N/A   30C    P0%16s / %5s |%11s / %9s |%8s %12s |"
        mig = f"| %{LEFT - 2}s | %{self.middle - 2}s | %{RIGHT - 2}s |"
        border = "+" + "-" * LEFT + "+" + "-" * self.middle + "+" + "-" * RIGHT + "+"
        return name, usage, mig, border

    def processes(self) -> str:
        """The Processes table, from the empty line before it, with no process running."""
        w = self.width
        pid = "PID".rjust(11 if self.branch < 570 else 17)
        titles = f"  GPU   GI   CI{pid}   Type   Process name"
        lines = [
            EMPTY_LINE,
            "+" + "-" * w + "+",
            "|" + f" {'Processes:':<{w - 1}}" + "|",
            "|" + f"{titles}{'GPU Memory':>{w - len(titles) - 1}} " + "|",
            "|" + f"{'        ID   ID':<{w - 11}}{'Usage':<11}" + "|",
            "|" + "=" * w + "|",
            "|" + f"  {'No running processes found':<{w - 2}}" + "|",
            "+" + "-" * w + "+",
        ]
        return "\n".join(lines)
