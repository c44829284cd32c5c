"""check as a gate (gpuprov.check.api): the options it gives check, and each host's failures from the
results (a pair's or the cluster's result counts against every host it names)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuprov.check import api, flow
from gpuprov.check.options import CheckOptions


def _gate(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    results: list[dict[str, str]],
    names: list[str],
    **kw: Any,
) -> tuple[CheckOptions, api.Verdict]:
    """api.gate over a two-host inventory, check's run replaced by these results."""
    (tmp_path / "inventory.ini").write_text(
        "[gpu_nodes]\nn1 ansible_host=10.0.0.1\nn2 ansible_host=10.0.0.2\n"
    )
    (tmp_path / "lock.yml").write_text("gpu_stack:\n  cuda_version: '12.6.3'\n")
    seen: list[CheckOptions] = []

    def summarised(opts: CheckOptions) -> dict[str, Any]:
        seen.append(opts)
        return {"exit_code": 1, "results": results}

    monkeypatch.setattr(flow, "summarised", summarised)
    verdict = api.gate(tmp_path / "inventory.ini", names, tmp_path / "lock.yml", **kw)
    (opts,) = seen
    return opts, verdict


def test_the_gate_runs_check_on_the_hosts_with_the_lock_and_names_each_hosts_failures(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    results = [
        {"check": "cuda", "host": "n1", "status": "fail", "detail": "12.4.1 installed, lock 12.6.3"},
        {"check": "xid", "host": "n2", "status": "warn", "detail": "old Xid 31"},
        {"check": "ports", "host": "n1 <-> n2", "status": "could-not-run", "detail": ""},
    ]
    opts, verdict = _gate(monkeypatch, tmp_path, results, ["n1", "n2"], quick=True)
    assert (
        opts.limit == "n1,n2" and opts.quick and opts.extra_vars == {"gpu_stack": {"cuda_version": "12.6.3"}}
    )
    assert verdict.failed == {
        "n1": ["cuda: 12.4.1 installed, lock 12.6.3", "ports: could-not-run"],
        "n2": ["ports: could-not-run"],
    }
    assert verdict.reason("n2") == "ports: could-not-run"


def test_a_peer_joins_the_gate_and_only_what_names_the_batch_counts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A one-host batch (n1) with a peer (n2) still on the old lock: n2's own version failure and the
    versions-agree check (left out) do not count against n1; the pair's and the all-hosts' results do."""
    results = [
        {"check": "cuda", "host": "n2", "status": "fail", "detail": "12.4.1 installed, lock 12.6.3"},
        {"check": "ports", "host": "n1 <-> n2", "status": "pass", "detail": ""},
        {"check": "bandwidth", "host": "all 2 hosts", "status": "fail", "detail": "21.0 < 40.0"},
    ]
    opts, verdict = _gate(monkeypatch, tmp_path, results, ["n1"], quick=False, peers=["n2"])
    assert opts.limit == "n1,n2" and opts.skip == ("versions-agree",) and not opts.wanted("versions-agree")
    assert verdict.failed == {"n1": ["bandwidth: 21.0 < 40.0"]}
