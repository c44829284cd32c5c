"""What the per-host checks read: one host's gathered data, its inventory variables and the lock."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuprov import hosts
from gpuprov.check import expected, results
from gpuprov.check.results import Result, Status

LOCK = expected.LOCK_SOURCE
NO_GPU = "no GPU expected on this host"


@dataclass
class HostView:
    name: str
    vars: Mapping[str, Any]  # the host's inventory variables, -e values on top
    data: Mapping[str, Any]  # what hostprobe collected

    @property
    def lock(self) -> Mapping[str, str]:
        stack = self.vars.get("gpu_stack")
        return stack if isinstance(stack, Mapping) else {}

    @property
    def expected_gpus(self) -> tuple[int, str]:
        """How many GPUs the host should have, and where that number comes from."""
        count = hosts.gpu_count(self.vars)  # flow checked it before any host was contacted
        if count is not None:
            return count, "inventory (gpuprov_gpu_count)"
        return int(self.data.get("pci_nvidia_gpus") or 0), "the PCI bus (NVIDIA display/3D controllers)"

    @property
    def has_gpus(self) -> bool:
        return self.expected_gpus[0] > 0

    def tool(self, key: str) -> Mapping[str, Any]:
        value = self.data.get(key)
        return value if isinstance(value, Mapping) else {}

    def result(self, check: str, status: Status, **fields: str) -> Result:
        return Result(check=check, host=self.name, status=status, **fields)

    def verdict(
        self, check: str, ok: bool, *, action: str, otherwise: Status = Status.FAIL, **fields: str
    ) -> Result:
        """results.verdict for this host."""
        return results.verdict(check, self.name, ok, action=action, otherwise=otherwise, **fields)

    def not_applicable(self, check: str, why: str) -> list[Result]:
        return [self.result(check, Status.NOT_APPLICABLE, detail=why)]


def did_not_run(run: Mapping[str, Any], what: str) -> str | None:
    """Why a tool gave no answer (not started, missing, timed out), or None when it ran."""
    if run.get("skipped"):  # hostprobe's reason (a hung driver)
        return str(run["skipped"])
    if run.get("missing"):
        return f"{what} is not installed on the host"
    if run.get("timeout"):
        return f"{what} did not finish within {run['timeout']} s"
    if run.get("rc") is None:
        return f"{what} did not run"
    return None


def upstream(version: str) -> str:
    """A package version without its epoch and its packaging release: 3:550.127.08-1.el9 -> 550.127.08."""
    return version.split(":", 1)[-1].split("-", 1)[0]
