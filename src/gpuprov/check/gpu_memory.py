"""The gpu-memory check: row remapping, page retirement and ECC counters of every GPU, judged as Azure's
node health check judges them on A100/H100 (azurehpc-health-checks customTests/azure_gpu_ecc.nhc, with the
thresholds of conf/nd96isr_h100_v5.conf) and NVIDIA's GPU memory error management guide.

The counters come from `nvidia-smi --query-gpu=ecc.errors...` (names stable across driver branches), else
from the `-q` labels (which changed: parsers.memory_health); remaps and retirement from `-q`.
"""

from __future__ import annotations

from gpuprov.check import parsers
from gpuprov.check.gpu_checks import gpu_query
from gpuprov.check.host_view import HostView
from gpuprov.check.results import Result, Status

REMAPPED_UNCORRECTABLE_MAX = 512  # azure_gpu_ecc.nhc: "Row remap uncorrectable error count is too high"
SRAM_CORRECTABLE_MAX = 10000  # conf/nd96isr_h100_v5.conf: `check_gpu_ecc 20000000 10000`

SOURCE = (
    "nvidia-smi --query-gpu=ecc.errors.* and -q (Remapped Rows, Retired Pages); fail rules of Azure's "
    "azurehpc-health-checks azure_gpu_ecc.nhc (nd96isr_h100_v5.conf thresholds); NVIDIA's GPU memory error "
    "management guide (https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/)"
)


def findings(health: parsers.MemoryHealth) -> tuple[list[str], list[str]]:
    """What fails the GPU now, and what is only history (aggregate DRAM uncorrectable errors)."""
    dram_history = health.uncorrectable_aggregate - health.sram_uncorrectable_aggregate
    failing = [
        text
        for flag, text in (
            (health.remap_pending, "row remap pending"),
            (health.remap_failed, "row remapping failed"),
            (health.retirement_pending, "page retirement pending"),
            (
                health.uncorrectable_volatile > 0,
                f"{health.uncorrectable_volatile} uncorrectable ECC (volatile)",
            ),
            (
                health.sram_uncorrectable_aggregate > 0,
                f"{health.sram_uncorrectable_aggregate} uncorrectable SRAM ECC (aggregate)",
            ),
            (
                health.remapped_uncorrectable > REMAPPED_UNCORRECTABLE_MAX,
                f"{health.remapped_uncorrectable} rows remapped for uncorrectable errors "
                f"(> {REMAPPED_UNCORRECTABLE_MAX})",
            ),
            (
                health.sram_correctable > SRAM_CORRECTABLE_MAX,
                f"{health.sram_correctable} correctable SRAM ECC (> {SRAM_CORRECTABLE_MAX})",
            ),
        )
        if flag
    ]
    history = [f"{dram_history} uncorrectable ECC (aggregate)"] if dram_history > 0 else []
    return failing, history


def gpu_memory(view: HostView) -> list[Result]:
    """Per GPU: a pending or failed remap or retirement, uncorrectable ECC since the driver loaded, any
    uncorrectable SRAM error in the GPU's life, or counts past Azure's limits fail; uncorrectable DRAM errors
    only in the GPU's life warn (a remap or retirement may have dealt with them)."""
    query, otherwise = gpu_query(view, "gpu-memory")
    if query is None:
        return otherwise
    counts = _ecc_counts(view)
    failing, history = [], []
    for index, gpu in enumerate(query.gpus):
        health = parsers.with_ecc_query(parsers.memory_health(gpu), counts.get(gpu["bus_id"].upper()))
        now, past = findings(health)
        where = f"GPU {index} ({gpu['bus_id']})"
        if now:
            failing.append(f"{where}: {', '.join(now)}")
        elif past:
            history.append(f"{where}: {', '.join(past)}")
    status = Status.FAIL if failing else Status.WARN if history else Status.PASS
    return [
        view.result(
            "gpu-memory",
            status,
            measured="; ".join(failing + history) or f"{len(query.gpus)} GPU(s) clean",
            expected="no pending or failed remap or retirement, no uncorrectable ECC now or in SRAM, "
            f"<= {REMAPPED_UNCORRECTABLE_MAX} rows remapped for uncorrectable errors, "
            f"<= {SRAM_CORRECTABLE_MAX} correctable SRAM errors",
            source=SOURCE,
            action={
                Status.FAIL: "drain the GPU and reset it (nvidia-smi -r) or reboot to apply the remap; "
                "a failed remap, uncorrectable SRAM errors or counts past the limits: have the GPU serviced",
                Status.WARN: "watch the GPU: uncorrectable errors in its past",
            }.get(status, ""),
        )
    ]


def _ecc_counts(view: HostView) -> dict[str, dict[str, int | None]]:
    """The query's counters by bus id; none where it did not answer (an older driver: -q is read)."""
    run = view.tool("smi_ecc")
    return parsers.ecc_query(str(run.get("stdout", ""))) if run.get("rc") == 0 else {}
