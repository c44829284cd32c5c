"""The drift probe (gpuprov/onhost/managed_state.py): its parsers against recorded real outputs
(tests/recorded/managed-state/SOURCES.md), its digests of files on disk, and its refusals."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

from gpuprov.onhost import managed_state as probe

RECORDED = Path(__file__).parents[2] / "recorded" / "managed-state"


def recorded(name: str) -> str:
    return (RECORDED / name).read_text()


def test_dpkg_query_installed_missing_and_held() -> None:
    states = probe.parse_dpkg_query(
        ["openssh-server", "bash", "no-such-pkg"],
        int(recorded("dpkg-query-installed-and-missing.rc")),
        recorded("dpkg-query-installed-and-missing.stdout"),
        recorded("dpkg-query-installed-and-missing.stderr"),
    )
    assert states == {
        "openssh-server": "amd64 1:9.2p1-2+deb12u10 install ok installed",
        "bash": "amd64 5.2.15-2+b13 install ok installed",
        "no-such-pkg": "absent",
    }
    held = probe.parse_dpkg_query(["bash"], 0, recorded("dpkg-query-held.stdout"), "")
    assert held["bash"] == "amd64 5.2.15-2+b13 hold ok installed"  # unheld -> held is drift


def test_dpkg_query_without_an_answer_for_a_name_is_an_error() -> None:
    with pytest.raises(probe.ProbeError, match="no answer for libnccl2"):
        probe.parse_dpkg_query(["bash", "libnccl2"], 0, recorded("dpkg-query-held.stdout"), "")
    with pytest.raises(probe.ProbeError, match="failed"):
        probe.parse_dpkg_query(["bash"], 2, "", "dpkg-query: error: cannot open /var/lib/dpkg/status\n")


def test_rpm_query_installed_and_missing() -> None:
    states = probe.parse_rpm_query(
        ["openmpi", "python3.11", "no-such-pkg"],
        int(recorded("rpm-installed-and-missing.rc")),
        recorded("rpm-installed-and-missing.stdout"),
    )
    assert states == {
        "openmpi": "2:4.1.1-7.el9.x86_64",
        "python3.11": "(none):3.11.7-1.el9_4.7.x86_64",
        "no-such-pkg": "absent",
    }
    missing = probe.parse_rpm_query(
        ["openssh-server", "no-such-pkg"],
        int(recorded("rpm-not-installed.rc")),
        recorded("rpm-not-installed.stdout"),
    )
    assert missing == {"openssh-server": "absent", "no-such-pkg": "absent"}


def test_rpm_exit_status_beyond_the_missing_names_is_an_error() -> None:
    with pytest.raises(probe.ProbeError, match="besides packages not installed"):
        probe.parse_rpm_query(["openssh-server", "no-such-pkg"], 3, recorded("rpm-not-installed.stdout"))


def test_systemctl_show_blocks_follow_the_units_given() -> None:
    units = ["ssh.service", "no-such.service", "systemd-journald.service"]
    states = probe.parse_systemctl_show(units, 0, recorded("systemctl-show-three-units.stdout"))
    assert states == {
        "ssh.service": "enabled active",
        "no-such.service": "- inactive",
        "systemd-journald.service": "static active",
    }
    with pytest.raises(probe.ProbeError, match="answered 3 units for 2"):
        probe.parse_systemctl_show(units[:2], 0, recorded("systemctl-show-three-units.stdout"))
    with pytest.raises(probe.ProbeError, match="exit 1"):
        probe.parse_systemctl_show(units, 1, "")


def write_manifest(folder: Path, role: str, **lists: Any) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{role}.json").write_text(json.dumps({"schema": 1, "role": role, **lists}))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"schema": 2, "role": "nccl"}, "not a schema 1 manifest"),
        ({"schema": 1, "role": "cuda"}, "not a schema 1 manifest of role nccl"),
        ({"schema": 1, "role": "nccl", "users": ["x"]}, "keys this probe does not know: users"),
        ({"schema": 1, "role": "nccl", "files": "/etc/nccl.conf"}, "files is not a list"),
        ({"schema": 1, "role": "nccl", "files": ["{{ nccl_conf }}"]}, "unrendered template"),
        ({"schema": 1, "role": "nccl", "firewall": "yes"}, "firewall is not true or false"),
    ],
)
def test_a_manifest_not_exactly_schema_1_is_an_error_of_its_role(
    tmp_path: Path, content: dict[str, Any], message: str
) -> None:
    (tmp_path / "nccl.json").write_text(json.dumps(content))
    report = probe.collect(str(tmp_path))
    assert message in report["roles"]["nccl"]["error"]


def test_files_are_digested_by_content_mode_and_owner_links_by_target(tmp_path: Path) -> None:
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_IB_DISABLE=0\n")
    conf.chmod(0o644)
    (tmp_path / "link").symlink_to("nccl.conf")
    first = probe.file_items(str(conf))[f"files {conf}"]
    assert first.startswith("sha256:") and first.endswith(f" 644 {os.getuid()} {os.getgid()}")
    conf.chmod(0o600)
    assert probe.file_items(str(conf))[f"files {conf}"] != first  # a mode change is drift
    assert probe.file_items(str(tmp_path / "link")) == {f"files {tmp_path}/link": "link:nccl.conf"}
    assert probe.file_items(str(tmp_path / "gone")) == {f"files {tmp_path}/gone": "absent"}
    matched = probe.file_items(str(tmp_path / "*.conf"))
    assert list(matched) == [f"files {conf}"]
    assert probe.file_items(str(tmp_path / "*.list")) == {f"files {tmp_path}/*.list": "absent"}


def test_collect_digests_every_role_and_one_broken_manifest_spoils_only_its_role(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    managed = tmp_path / "managed"
    conf = tmp_path / "nccl.conf"
    conf.write_text("x\n")
    site = tmp_path / "site-packages"
    (site / "torch-2.5.1.dist-info").mkdir(parents=True)
    write_manifest(managed, "nccl", files=[str(conf)], packages=["bash"])
    write_manifest(managed, "python_env", listings=[f"{site}/*.dist-info"])
    (managed / "cuda.json").write_text("{not json")
    calls: list[list[str]] = []

    def run(argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        calls.append(argv)
        return 0, recorded("dpkg-query-held.stdout"), ""

    monkeypatch.setattr(probe, "run", run)
    monkeypatch.setattr(probe, "package_manager", lambda fields: "dpkg")
    report = probe.collect(str(managed))
    assert report["roles"]["nccl"]["items"][f"files {conf}"].startswith("sha256:")
    assert report["roles"]["nccl"]["items"]["packages bash"] == "amd64 5.2.15-2+b13 hold ok installed"
    assert report["roles"]["python_env"]["items"][f"listings {site}/*.dist-info"].startswith(
        "1 names sha256:"
    )
    assert "cannot read" in report["roles"]["cuda"]["error"]
    assert [argv[0] for argv in calls] == ["dpkg-query"]  # one tool call for every role's packages
    assert set(report["identity"]) == {
        "kernel",
        "os_release",
        "machine_id",
        "nvidia_driver",
        "nvidia_devices",
        "cpus",
        "memory_kb",
        "ipv4",
    }
    assert len(report["identity"]["machine_id"]) == 64  # a keyed hash, never the id itself (machine-id(5))


def test_a_fifo_is_named_not_read(tmp_path: Path) -> None:
    """A FIFO in a listed file's place (a user's ~/.openmpi) would block root's read: its type is digested."""
    fifo = tmp_path / "mca-params.conf"
    os.mkfifo(fifo)
    assert probe.file_digest(str(fifo)).startswith("not a regular file (10000) ")


def test_the_local_ipv4_addresses_from_the_kernels_local_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trie = (
        "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n"
        "     |-- 10.1.0.7\n        /32 host LOCAL\n     |-- 10.1.0.255\n        /32 link BROADCAST\n"
        "Local:\n     |-- 127.0.0.1\n        /32 host LOCAL\n     |-- 10.1.0.7\n        /32 host LOCAL\n"
    )
    real_open = open

    def fake_open(path: str, *args: Any, **kwargs: Any) -> Any:
        if path == "/proc/net/fib_trie":
            return io.StringIO(trie)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", fake_open)
    assert probe.local_ipv4() == ["10.1.0.7"]


def test_a_failing_tool_spoils_every_role_not_just_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_manifest(tmp_path, "slurm", services=["slurmd.service"])
    write_manifest(tmp_path, "nccl", files=["/etc/nccl.conf"])
    monkeypatch.setattr(
        probe, "run", lambda argv, stdin=None: (1, "", "System has not been booted with systemd")
    )
    report = probe.collect(str(tmp_path))
    assert all("systemctl show failed" in role["error"] for role in report["roles"].values())


def test_the_package_manager_follows_os_release() -> None:
    assert probe.package_manager({"ID": "rocky", "ID_LIKE": "rhel centos fedora"}) == "rpm"
    assert probe.package_manager({"ID": "ubuntu", "ID_LIKE": "debian"}) == "dpkg"
    assert probe.package_manager({"ID": "debian"}) == "dpkg"
