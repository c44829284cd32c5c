"""Per-host checks on gathered data: real tool outputs (recordings) where the check reads one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuprov.check import (
    cross_checks,
    gpu_checks,
    gpu_memory,
    gpudirect,
    host_checks,
    host_view,
    network_checks,
    version_checks,
)
from gpuprov.check.results import Result, Status, exit_code, ordered, verdict
from gpuprov.errors import ExitCode

RECORDED = Path(__file__).parents[2] / "recorded"
LOCK = {
    "driver_branch": "550",
    "driver_version": "550.127.08",
    "driver_flavor": "open",
    "cuda_version": "12.4.1",
    "cudnn_version": "9.5.1.17",
    "nccl_version": "2.21.5",
    "pytorch_version": "2.13.0",
    "pytorch_cuda_tag": "cpu",
}
PACKAGES = {
    "libcuda1": "550.127.08-1",
    "nvidia-driver-cuda": "550.127.08-1",
    "nvidia-kernel-open-dkms": "550.127.08-1",
    "cuda-toolkit-12-4": "12.4.1-1",
    "libcudnn9-cuda-12": "9.5.1.17-1",
    "libnccl2": "2.21.5-1+cuda12.4",
}


def ran(stdout: str, rc: int = 0) -> dict[str, Any]:
    return {"rc": rc, "stdout": stdout, "stderr": ""}


def gathered(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "pci_nvidia_gpus": 0,
        "proc_driver_version": None,
        "cuda_version_json": json.dumps({"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}),
        "packages": {"manager": "apt", "installed": dict(PACKAGES), "held": list(PACKAGES)},
        "env": ran(json.dumps({"python": "3.11.2", "torch": "2.13.0+cpu", "torch_cuda": None})),
        "python_path": "/opt/gpuprov/envs/train/bin/python",
        "sysctl": {"net.ipv4.tcp_rmem": "4096 87380 268435456"},
        "sysctl_readonly": [],
        "nccl_conf": "# Ansible managed\nNCCL_SOCKET_FAMILY=AF_INET\n",
        "interfaces": {"lo": "unknown", "eth0": "up"},
        "infiniband": [],
        "kernel_log": {"rc": 0, "stdout": ""},
        "smi_q": {"rc": None, "missing": True},
        "smi_nvlink": {"rc": None, "missing": True},
    }
    data.update(changes)
    return data


def view(data: dict[str, Any], **host_vars: Any) -> host_view.HostView:
    sysctl = {
        "network_tuning_sysctl": {"net.ipv4.tcp_rmem": "4096 87380 268435456"},
        "network_tuning_ephemeral_ports": "",
    }
    return host_view.HostView("node1", {"gpu_stack": LOCK, **sysctl, **host_vars}, data)


def statuses(results: list[Result]) -> dict[str, Status]:
    return {r.check: r.status for r in results}


def run_all(v: host_view.HostView) -> list[Result]:
    return [r for check in host_checks.CHECKS.values() for r in check(v)]


def test_bootstrapped_host_without_gpu_passes_and_gpu_checks_do_not_apply() -> None:
    results = run_all(view(gathered()))
    found = statuses(results)
    for name in (
        "driver-package",
        "cuda",
        "cudnn",
        "nccl",
        "holds",
        "python",
        "torch",
        "sysctl",
        "nccl-conf",
    ):
        assert found[name] is Status.PASS, name
    for name in (
        "driver-module",
        "gpu-count",
        "persistence",
        "xid",
        "nvlink",
        "infiniband",
        "nccl-interface",
    ):
        assert found[name] is Status.NOT_APPLICABLE, name
    assert exit_code(results) is ExitCode.OK


def test_versions_that_differ_from_the_lock_fail() -> None:
    packages = dict(PACKAGES, libnccl2="2.20.3-1+cuda12.4")
    data = gathered(
        packages={"manager": "apt", "installed": packages, "held": list(packages)},
        env=ran(json.dumps({"python": "3.11.2", "torch": "2.12.0+cpu", "torch_cuda": None})),
    )
    results = run_all(view(data))
    assert statuses(results)["nccl"] is Status.FAIL
    torch = next(r for r in results if r.check == "torch")
    assert (torch.status, torch.measured, torch.expected) == (Status.FAIL, "2.12.0+cpu", "2.13.0+cpu")


def test_a_package_not_held_fails_and_names_it() -> None:
    data = gathered(packages={"manager": "apt", "installed": dict(PACKAGES), "held": ["libcuda1"]})
    holds = version_checks.holds(view(data))[0]
    assert holds.status is Status.FAIL and "libnccl2" in holds.detail
    assert (
        version_checks.holds(
            view(data, nccl_hold=False, cudnn_hold="false", cuda_hold=False, nvidia_driver_hold=False)
        )[0].status
        is Status.PASS
    )


def test_holds_could_not_run_without_versionlock() -> None:
    data = gathered(packages={"manager": "dnf", "installed": dict(PACKAGES), "held": None})
    result = version_checks.holds(view(data))[0]
    assert result.status is Status.COULD_NOT_RUN and "versionlock" in result.action
    assert exit_code([result]) is ExitCode.CHECK_COULD_NOT_RUN


def test_gpu_host_from_recordings() -> None:
    # An RTX 5090 host (recorded nvidia-smi -q, open module 565 recorded from /proc), inventory says 1 GPU.
    proc = (RECORDED / "proc-driver-nvidia-version" / "open-x86_64-565.57.01").read_text()
    smi = (RECORDED / "nvidia-smi" / "query-1xRTX5090-570.124.06").read_text()
    v = view(gathered(proc_driver_version=proc, smi_q=ran(smi)), gpuprov_gpu_count="1")
    found = statuses(run_all(v))
    assert found["gpu-count"] is Status.PASS
    assert found["persistence"] is Status.PASS
    module = version_checks.driver_module(v)[0]
    assert (module.status, module.measured, module.expected) == (
        Status.FAIL,
        "565.57.01 open",
        "550.127.08 open",
    )


def test_gpu_missing_from_nvidia_smi() -> None:
    smi = (RECORDED / "nvidia-smi" / "query-1xRTX5090-570.124.06").read_text()
    result = gpu_checks.gpu_count(view(gathered(smi_q=ran(smi)), gpuprov_gpu_count=2))[0]
    assert (result.status, result.measured, result.expected, result.margin) == (Status.FAIL, "1", "2", "-1")


def test_persistence_off_fails() -> None:
    smi = (RECORDED / "nvidia-smi" / "query-1xV100-535.86.10").read_text()
    result = gpu_checks.persistence(view(gathered(smi_q=ran(smi)), gpuprov_gpu_count=1))[0]
    assert result.status is Status.FAIL


def test_nvidia_smi_failure_is_a_fail_missing_is_could_not_run() -> None:
    mismatch = (RECORDED / "nvidia-smi" / "error-version-mismatch-550.144").read_text()
    failed = gpu_checks.gpu_count(view(gathered(smi_q=ran(mismatch, rc=18)), gpuprov_gpu_count=1))[0]
    assert failed.status is Status.FAIL and "mismatch" in failed.detail
    missing = gpu_checks.gpu_count(view(gathered(), gpuprov_gpu_count=1))[0]
    assert missing.status is Status.COULD_NOT_RUN


def test_xid_that_needs_action_fails_with_its_meaning() -> None:
    log = (RECORDED / "dmesg-xid" / "journal-k-xid79").read_text()
    result = gpu_checks.xid_events(view(gathered(kernel_log={"rc": 0, "stdout": log}), gpuprov_gpu_count=1))[
        0
    ]
    assert result.status is Status.FAIL and "fallen off the bus" in result.detail


def test_xid_not_in_the_table_warns() -> None:
    log = (RECORDED / "dmesg-xid" / "dmesg-bumblebee").read_text()
    result = gpu_checks.xid_events(view(gathered(kernel_log={"rc": 0, "stdout": log}), gpuprov_gpu_count=1))[
        0
    ]
    assert (result.status, result.measured) == (Status.WARN, "Xid 31, 32")


def test_xid_94_without_48_fails_as_a_contained_uncorrectable_error() -> None:
    log = (RECORDED / "dmesg-xid" / "dmesg-T-akash-535.183.01").read_text()
    result = gpu_checks.xid_events(view(gathered(kernel_log={"rc": 0, "stdout": log}), gpuprov_gpu_count=1))[
        0
    ]
    assert (result.status, result.measured) == (Status.FAIL, "Xid 31, 43, 94")
    assert "Xid 94" in result.detail and "contained uncorrectable ECC" in result.detail


def test_unreadable_kernel_log_could_not_run() -> None:
    data = gathered(kernel_log={"rc": None, "stdout": "", "error": "dmesg failed"})
    assert gpu_checks.xid_events(view(data, gpuprov_gpu_count=1))[0].status is Status.COULD_NOT_RUN


def test_inactive_nvlink_fails() -> None:
    text = (RECORDED / "nvidia-smi" / "nvlink-status-V100-inactive").read_text()
    result = gpu_checks.nvlink(view(gathered(smi_nvlink=ran(text)), gpuprov_gpu_count=1))[0]
    assert (result.status, result.measured) == (Status.FAIL, "4 of 6 active")
    assert "GPU 3 link 3" in result.detail


def test_infiniband_port_down_fails_where_nccl_ib_hca_names_it() -> None:
    text = (RECORDED / "ibstat" / "rdma-core-mlx4-2port").read_text()
    data = gathered(infiniband=["mlx4_0"], ibstat=ran(text))
    results = network_checks.infiniband(view(data, network_tuning_nccl_ib_hca="=mlx4_0"))
    assert [r.status for r in results] == [Status.FAIL, Status.PASS]


def test_infiniband_port_down_beside_an_active_one_warns_without_nccl_ib_hca() -> None:
    """NCCL without NCCL_IB_HCA uses the ports that are up: an uncabled spare or storage port is no fault."""
    text = (RECORDED / "ibstat" / "rdma-core-mlx4-2port").read_text()
    results = network_checks.infiniband(view(gathered(infiniband=["mlx4_0"], ibstat=ran(text))))
    assert [r.status for r in results] == [Status.WARN, Status.PASS]
    assert "network_tuning_nccl_ib_hca" in results[0].action
    only_down = text[: text.index("Port 2:")]
    results = network_checks.infiniband(view(gathered(infiniband=["mlx4_0"], ibstat=ran(only_down))))
    assert [r.status for r in results] == [Status.FAIL]


def test_sysctl_reverted_fails_unless_the_host_cannot_set_it() -> None:
    data = gathered(sysctl={"net.ipv4.tcp_rmem": "4096 131072 6291456"})
    result = network_checks.sysctl(view(data))[0]
    assert result.status is Status.FAIL and "net.ipv4.tcp_rmem=4096 131072 6291456" in result.detail
    readonly = gathered(
        sysctl={"net.ipv4.tcp_rmem": "4096 131072 6291456"}, sysctl_readonly=["net.ipv4.tcp_rmem"]
    )
    assert network_checks.sysctl(view(readonly))[0].status is Status.FAIL  # not tolerated by the inventory
    tolerated = network_checks.sysctl(view(readonly, network_tuning_tolerate_unsettable=True))[0]
    assert tolerated.status is Status.WARN


def test_nccl_conf_compared_with_the_role_settings() -> None:
    v = view(
        gathered(nccl_conf="# managed\nNCCL_SOCKET_FAMILY=AF_INET\nNCCL_SOCKET_IFNAME=eth0\n"),
        network_tuning_nccl_socket_ifname="eth0",
    )
    assert network_checks.nccl_conf(v)[0].status is Status.PASS
    assert network_checks.nccl_interface(v)[0].status is Status.PASS
    down = view(gathered(interfaces={"eth0": "down"}), network_tuning_nccl_socket_ifname="eth0")
    assert network_checks.nccl_interface(down)[0].status is Status.FAIL
    assert network_checks.nccl_conf(view(gathered(nccl_conf=None)))[0].status is Status.FAIL


def test_versions_agree_names_the_odd_host() -> None:
    results = [Result("torch", name, Status.PASS, measured="2.13.0+cpu") for name in ("node1", "node3")] + [
        Result("torch", "node2", Status.FAIL, measured="2.12.0+cpu")
    ]
    agree = cross_checks.versions_agree(results, 3)
    assert [(r.host, r.status) for r in agree] == [("node2", Status.FAIL)]
    assert "the other 2 host(s) have 2.13.0+cpu" in agree[0].detail


def test_order_and_exit_codes() -> None:
    results = [
        Result("a", "h", Status.PASS),
        Result("b", "h", Status.WARN),
        Result("c", "h", Status.COULD_NOT_RUN),
        Result("d", "h", Status.FAIL),
        Result("e", "h", Status.NOT_APPLICABLE),
    ]
    assert [r.check for r in ordered(results)] == ["d", "c", "b", "a", "e"]
    assert exit_code(results) is ExitCode.FAILURE
    assert exit_code(results[:3]) is ExitCode.CHECK_COULD_NOT_RUN
    assert exit_code([results[0], results[1], results[4]]) is ExitCode.OK


def test_locked_cuda_newer_than_the_driver_supports_fails() -> None:
    newer = (RECORDED / "nvidia-smi" / "query-1xRTX5090-570.124.06").read_text()  # CUDA Version 12.8
    older = (RECORDED / "nvidia-smi" / "query-1xV100-535.86.10").read_text()  # CUDA Version 12.2
    ok = gpu_checks.cuda_driver(view(gathered(smi_q=ran(newer)), gpuprov_gpu_count=1))[0]
    assert (ok.status, ok.measured, ok.expected) == (Status.PASS, "12.8", ">= 12.4")
    too_old = gpu_checks.cuda_driver(view(gathered(smi_q=ran(older)), gpuprov_gpu_count=1))[0]
    assert (too_old.status, too_old.measured) == (Status.FAIL, "12.2")


def smi(name: str) -> str:
    return (RECORDED / "nvidia-smi" / name).read_text()


def matmul_run(tflops: dict[str, float], busy: str) -> dict[str, Any]:
    return {**ran(json.dumps({"n": 16384, "dtype": "float16", "tflops": tflops})), "smi_q_busy": ran(busy)}


def test_pending_row_remap_fails_gpu_memory_naming_the_gpu() -> None:
    v = view(gathered(smi_q=ran(smi("query-full-pending-remap-A100SXM4-555.42.02"))), gpuprov_gpu_count=1)
    result = gpu_memory.gpu_memory(v)[0]
    assert result.status is Status.FAIL
    assert result.measured == "GPU 0 (00000000:9E:00.0): row remap pending"
    clean = view(gathered(smi_q=ran(smi("query-full-1xH100SXM-565.57.01"))), gpuprov_gpu_count=1)
    assert gpu_memory.gpu_memory(clean)[0].status is Status.PASS


def test_uncorrectable_ecc_fails_now_and_warns_as_history() -> None:
    line = "            DRAM Uncorrectable            : 0\n"
    head, middle, tail = smi("query-full-1xH100SXM-565.57.01").split(line)
    counted = line.replace(": 0", ": 1")
    for text, status, scope in (
        (head + counted + middle + line + tail, Status.FAIL, "volatile"),
        (head + line + middle + counted + tail, Status.WARN, "aggregate"),
    ):
        result = gpu_memory.gpu_memory(view(gathered(smi_q=ran(text)), gpuprov_gpu_count=1))[0]
        assert (result.status, result.measured) == (
            status,
            f"GPU 0 (00000000:18:00.0): 1 uncorrectable ECC ({scope})",
        )


def test_gpu_checks_do_not_apply_without_gpus() -> None:
    v = view(gathered())
    for check in ("gpu-memory", "matmul", "clocks", "pcie", "peermem", "fabricmanager", "dkms"):
        assert host_checks.CHECKS[check](v)[0].status is Status.NOT_APPLICABLE, check


def test_matmul_warns_for_a_gpu_below_the_median() -> None:
    busy = smi("query-full-1xH100SXM-565.57.01")
    v = view(
        gathered(matmul=matmul_run({"0": 700.0, "1": 690.0, "2": 400.0, "3": 710.0}, busy)),
        gpuprov_gpu_count=4,
    )
    results = gpu_checks.matmul(v)
    assert [r.status for r in results] == [Status.PASS, Status.PASS, Status.WARN, Status.PASS]
    assert results[2].measured == "GPU 2: 400" and results[2].expected.endswith(
        ">= 0.75 x the host's median (695)"
    )


def test_matmul_fails_when_torch_sees_no_gpu() -> None:
    result = gpu_checks.matmul(view(gathered(), gpuprov_gpu_count=1))[0]
    assert result.status is Status.FAIL and "torch.cuda.is_available()" in result.detail
    assert gpu_checks.clocks(view(gathered(), gpuprov_gpu_count=1))[0].status is Status.COULD_NOT_RUN


def test_clocks_and_pcie_read_under_load() -> None:
    # Recorded outputs stand for what nvidia-smi showed during the matmul.
    idle = view(
        gathered(matmul=matmul_run({"0": 700.0}, smi("query-full-1xH100SXM-565.57.01"))), gpuprov_gpu_count=1
    )
    assert gpu_checks.clocks(idle)[0].status is Status.PASS  # Idle is not a reason to warn
    assert gpu_checks.pcie(idle)[0].status is Status.PASS
    capped = view(
        gathered(matmul=matmul_run({"0": 100.0}, smi("query-full-1xRTX5090-570.124.06"))), gpuprov_gpu_count=1
    )
    clocks = gpu_checks.clocks(capped)[0]  # SW Power Cap under the GEMM is the power limit doing its job
    assert (clocks.status, clocks.measured) == (Status.PASS, "no clocks event reason active under load")
    slowed = smi("query-full-1xRTX5090-570.124.06").replace(
        "        HW Slowdown                       : Not Active",
        "        HW Slowdown                       : Active",
    )
    assert "HW Slowdown                       : Active" in slowed
    hw = gpu_checks.clocks(view(gathered(matmul=matmul_run({"0": 100.0}, slowed)), gpuprov_gpu_count=1))[0]
    assert (hw.status, hw.measured) == (Status.WARN, "GPU 0: HW Slowdown")
    pcie = gpu_checks.pcie(capped)[0]
    assert (pcie.status, pcie.measured) == (Status.WARN, "GPU 0: Gen1 x8 (max Gen5 x16)")


def test_peermem_where_there_is_rdma() -> None:
    # An old kernel (no DMA-BUF in its RDMA core): only nvidia_peermem gives NCCL GPUDirect RDMA.
    rdma = gathered(infiniband=["mlx5_0"], modules=["nvidia", "mlx5_ib"], kernel="5.4.0-216-generic")
    assert gpudirect.peermem(view(rdma, gpuprov_gpu_count=1))[0].status is Status.FAIL
    rdma["modules"].append("nvidia_peermem")
    assert gpudirect.peermem(view(rdma, gpuprov_gpu_count=1))[0].status is Status.PASS
    assert gpudirect.peermem(view(gathered(), gpuprov_gpu_count=1))[0].status is Status.NOT_APPLICABLE


def test_fabricmanager_where_there_are_nvswitches() -> None:
    down = gathered(pci_nvswitches=4, fabricmanager=ran("inactive\n", rc=3))
    result = gpu_checks.fabricmanager(view(down, gpuprov_gpu_count=8))[0]
    assert result.status is Status.FAIL and result.measured == "nvidia-fabricmanager inactive"
    up = gathered(pci_nvswitches=4, fabricmanager=ran("active\n"))
    assert gpu_checks.fabricmanager(view(up, gpuprov_gpu_count=8))[0].status is Status.PASS
    none = gathered(pci_nvswitches=0)
    assert gpu_checks.fabricmanager(view(none, gpuprov_gpu_count=8))[0].status is Status.NOT_APPLICABLE


def test_dkms_module_built_for_the_running_kernel() -> None:
    text = (RECORDED / "dkms" / "status-dkms3-nvidia-535.86.05").read_text()
    lock = {**LOCK, "driver_version": "535.86.05"}
    built = gathered(dkms=ran(text), kernel="6.5.0-060500rc5-generic")
    assert gpu_checks.dkms(view(built, gpuprov_gpu_count=1, gpu_stack=lock))[0].status is Status.PASS
    other_kernel = gathered(dkms=ran(text), kernel="6.8.0-31-generic")
    result = gpu_checks.dkms(view(other_kernel, gpuprov_gpu_count=1, gpu_stack=lock))[0]
    assert result.status is Status.FAIL and "6.8.0-31-generic" in result.expected
    precompiled = gathered(dkms={"rc": None, "missing": True, "stdout": "", "stderr": ""})
    assert gpu_checks.dkms(view(precompiled, gpuprov_gpu_count=1))[0].status is Status.NOT_APPLICABLE


def test_verdict_passes_without_an_action_and_fails_or_warns_with_it() -> None:
    v = view(gathered())
    passed = v.verdict("cuda", True, measured="12.4.1", expected="12.4.1", source="the lock", action="fix it")
    assert passed == Result(
        "cuda", "node1", Status.PASS, measured="12.4.1", expected="12.4.1", source="the lock", action=""
    )
    failed = v.verdict("cuda", False, measured="12.2", expected="12.4.1", action="fix it")
    assert (failed.status, failed.host, failed.measured, failed.action) == (
        Status.FAIL,
        "node1",
        "12.2",
        "fix it",
    )
    warned = v.verdict("pcie", False, otherwise=Status.WARN, detail="Gen1", action="reseat it")
    assert (warned.status, warned.detail, warned.action) == (Status.WARN, "Gen1", "reseat it")


def test_verdict_for_a_pair_or_the_cluster_is_the_same_rule() -> None:
    assert verdict("bandwidth", "a <-> b", True, margin="+5%", action="look") == Result(
        "bandwidth", "a <-> b", Status.PASS, margin="+5%"
    )
    assert verdict("bandwidth", "cluster", False, action="look").action == "look"


def _with_gpus(smi: str, count: int) -> str:
    """A recorded one-GPU `nvidia-smi -q` as a host with `count` such GPUs prints it (its GPU section
    repeated, each with its own bus id)."""
    head, sep, section = smi.partition("\nGPU 00000000:02:00.0\n")
    assert sep, "the recording's GPU section"
    head = head.replace("Attached GPUs                             : 1", f"Attached GPUs : {count}")
    return head + "".join(
        f"\nGPU 00000000:{bus:02X}:00.0\n" + section.replace("00000000:02:00.0", f"00000000:{bus:02X}:00.0")
        for bus in range(2, 2 + count)
    )


def test_more_gpus_than_expected_is_advised_as_more_not_missing() -> None:
    smi = _with_gpus((RECORDED / "nvidia-smi" / "query-full-1xRTX5090-570.124.06").read_text(), 4)
    for expected in (1, 2, 3):
        result = gpu_checks.gpu_count(view(gathered(smi_q=ran(smi)), gpuprov_gpu_count=expected))[0]
        assert (result.status, result.measured, result.margin) == (Status.FAIL, "4", str(4 - expected))
        assert "more than expected" in result.action and "missing" not in result.action, result.action
    for expected in (5, 8):
        result = gpu_checks.gpu_count(view(gathered(smi_q=ran(smi)), gpuprov_gpu_count=expected))[0]
        assert "missing" in result.action and "more" not in result.action, result.action


def test_infiniband_judges_only_the_cas_nccl_ib_hca_names() -> None:
    # gpud-ib-200's mlx5_7 (Active, 200) and rdma-core's mlx4_0 (port 1 Down) on one host
    text = (RECORDED / "ibstat" / "gpud-ib-200").read_text() + (
        RECORDED / "ibstat" / "rdma-core-mlx4-2port"
    ).read_text()
    data = gathered(infiniband=["mlx4_0", "mlx5_7"], ibstat=ran(text))
    every = network_checks.infiniband(view(data))
    assert Status.WARN in [r.status for r in every]  # mlx4_0's down port, beside active ones, unnamed
    picked = network_checks.infiniband(view(data, network_tuning_nccl_ib_hca="=mlx5_7"))
    assert [r.status for r in picked] == [Status.NOT_APPLICABLE, Status.PASS]
    assert picked[0].detail.startswith("mlx4_0: not NCCL's (network_tuning_nccl_ib_hca==mlx5_7)")
