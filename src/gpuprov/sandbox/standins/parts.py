"""The pieces every recipe uses: the package with its STANDIN note, libraries, systemd units, headers."""

from __future__ import annotations

from gpuprov.sandbox.standins.elf import elf_shared_object
from gpuprov.sandbox.standins.model import Entry, File, Format, Link, Package, Pin


def package(
    fmt: Format,
    version: str,
    release: str,
    name: str,
    summary: str,
    entries: list[Entry],
    *,
    epoch: int = 0,
    depends: tuple[tuple[Pin, ...], ...] = (),
    provides: tuple[Pin, ...] = (),
    conflicts: tuple[str, ...] = (),
    exclusive_group: str = "",
    postinst: str = "",
    arch_independent: bool = False,
) -> Package:
    """A Package with the STANDIN note that every stand-in carries."""
    note = File(f"/usr/share/doc/{name}/STANDIN", _standin_note(name, version).encode())
    return Package(
        fmt,
        name,
        version,
        release,
        summary,
        (*entries, note),
        epoch=epoch,
        depends=depends,
        provides=provides,
        conflicts=conflicts,
        exclusive_group=exclusive_group,
        postinst=postinst,
        arch_independent=arch_independent,
    )


def _standin_note(name: str, version: str) -> str:
    return (
        f"{name} {version} here is a gpuprov sandbox stand-in: it has the name and version of NVIDIA's "
        "package but carries small scripts and placeholder files, no NVIDIA software.\n"
    )


def library(
    directory: str, lib: str, version: str, soname_version: str, what: str, dev_link: bool = False
) -> list[Entry]:
    """lib.so.<version> as a code-free ELF with the real soname, the soname link and maybe lib.so."""
    soname = f"{lib}.so.{soname_version}"
    real = f"{lib}.so.{version}"
    entries: list[Entry] = [
        File(f"{directory}/{real}", elf_shared_object(soname, f"gpuprov sandbox stand-in for {what}")),
    ]
    if real != soname:
        entries.append(Link(f"{directory}/{soname}", real))
    if dev_link:
        entries.append(Link(f"{directory}/{lib}.so", soname))
    return entries


def unit(description: str, exec_start: str, after: str = "", service_type: str = "simple") -> str:
    # Type=simple where the stand-in daemon stays in the foreground; nvidia-persistenced forks, as the real
    # one does (NVIDIA/nvidia-persistenced, init/systemd/nvidia-persistenced.service.template: Type=forking).
    after_line = f"After={after}\n" if after else ""
    return (
        f"# gpuprov sandbox stand-in for NVIDIA's unit of the same name\n"
        f"[Unit]\nDescription={description} (gpuprov sandbox stand-in)\n{after_line}\n"
        f"[Service]\nType={service_type}\nExecStart={exec_start}\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )


def header(what: str, defines: dict[str, str]) -> str:
    guard = "GPUPROV_STANDIN_" + "_".join(sorted(defines))[:40]
    lines = [
        f"/* gpuprov sandbox stand-in: the version defines of {what}, nothing else. */",
        f"#ifndef {guard}",
        f"#define {guard}",
    ]
    lines += [f"#define {name} {value}" for name, value in defines.items()]
    lines.append(f"#endif /* {guard} */")
    return "\n".join(lines) + "\n"
