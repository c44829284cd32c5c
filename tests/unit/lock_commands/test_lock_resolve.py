"""`gpuprov lock resolve`: the choice (resolving.resolve on the real table and made-up offers), the file it
writes (atomic, never over an existing one without --force, accepted by the lock check), and the command in
this process with the hosts' metadata faked (no SSH): bad input before any host, one line per host when no
lock fits."""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from pathlib import Path

import pytest
import yaml

from gpuprov import hosts, lock
from gpuprov.gpu_generations import PciGpu
from gpuprov.lock_commands import metadata, resolving
from gpuprov.repo_metadata import Offer
from tests.unit import in_process

TODAY = datetime.date(2026, 11, 26)
TABLE = lock.load_table()


def offer(drivers: Iterable[str], cudas: Iterable[str], cudnn: Iterable[tuple[str, str]],
          nccl: Iterable[tuple[str, str]]) -> Offer:  # fmt: skip
    return Offer({d: {"open", "proprietary"} for d in drivers}, set(cudas), set(cudnn), set(nccl))


# What the sandbox mirror's stand-ins carry (roughly): CUDA 12.4-12.8, drivers 550/570, cuDNN 9.5.1.17 only.
SANDBOX_LIKE = offer(
    ["550.127.08", "570.124.06"],
    ["12.4.1", "12.6.3", "12.8.1"],
    [("9.5.1.17", "12")],
    [("2.21.5", "12.4"), ("2.23.4", "12.6"), ("2.26.2", "12.8")],
)
CPU_ONLY = resolving.Wheels(frozenset({("2.13.0", "cpu", "cp311")}), "http://mirror/pypi/simple/torch/")
CUDA_WHEELS = resolving.Wheels(
    frozenset({("2.6.0", "cu126", "cp311"), ("2.6.0", "cu124", "cp311"), ("2.5.1", "cu124", "cp311")}),
    "https://download.pytorch.org/whl/torch/",
)


def resolve(offers: dict[str, Offer], wheels: resolving.Wheels, **wanted: object) -> resolving.Resolution:
    return resolving.resolve(TABLE, resolving.Wanted(**wanted), offers, wheels, TODAY)  # type: ignore[arg-type]


def test_the_newest_cuda_every_repository_carries_with_all_its_parts() -> None:
    found = resolve({"debian12": SANDBOX_LIKE, "rhel9": SANDBOX_LIKE}, CUDA_WHEELS)
    # 12.8.1 is carried, but no cuDNN the table lists for 12.8 is: 12.6.3 with the newest of each part
    assert found.lock == {
        "driver_branch": "570", "driver_version": "570.124.06", "driver_flavor": "open",
        "cuda_version": "12.6.3", "cudnn_version": "9.5.1.17", "nccl_version": "2.23.4",
        "pytorch_version": "2.6.0", "pytorch_cuda_tag": "cu126",
    }  # fmt: skip
    assert found.passed_over[-1].startswith("CUDA 12.8.1: debian12 has no cuDNN for CUDA 12.8.1")
    assert lock.check(found.lock, TABLE) == []
    assert "past its end of life" in found.reasons["driver_version"]  # R570: February 2026


def test_constraints_and_a_branch_in_support_first() -> None:
    newer = offer(
        ["570.211.01", "580.95.05", "590.48.01"],
        ["13.0.2"],
        [("9.15.0.58", "13")],
        [("2.28.9", "13.0")],
    )
    wheels = resolving.Wheels(frozenset({("2.10.0", "cu130", "cp312")}), "index")
    found = resolve({"ubuntu2204": newer}, wheels)
    # 590.48.01 is newer, but R590 is past its end of life and R580 is in support to June 2028
    assert (found.lock["driver_version"], found.lock["cuda_version"]) == ("580.95.05", "13.0.2")
    assert "a branch in support" in found.reasons["driver_version"]
    assert resolve({"ubuntu2204": newer}, wheels, driver_branch="590").lock["driver_version"] == "590.48.01"
    with pytest.raises(resolving.Unmet) as unmet:
        resolve({"ubuntu2204": newer, "debian12": SANDBOX_LIKE}, wheels, cuda="12.8")
    assert [b.reason for b in unmet.value.blockers] == [
        "ubuntu2204 carries no CUDA 12.8 release that the table lists for it (the repository has: 13.0.2)",
        "debian12 carries CUDA 12.8.1, which some other OS here does not",
    ]


def test_the_cpu_build_only_where_the_inventory_allows_it() -> None:
    with pytest.raises(resolving.Unmet) as unmet:
        resolve({"debian12": SANDBOX_LIKE}, CPU_ONLY)
    (blocker,) = unmet.value.blockers
    assert blocker.repository is None and blocker.reason.startswith(
        "http://mirror/pypi/simple/torch/ has no torch"
    )
    found = resolve({"debian12": SANDBOX_LIKE}, CPU_ONLY, allow_cpu=True)
    assert (found.lock["pytorch_version"], found.lock["pytorch_cuda_tag"]) == ("2.13.0", "cpu")
    assert "python_env_allow_cpu_torch" in found.reasons["pytorch_cuda_tag"]


def test_no_cuda_in_common_names_each_repositorys_own() -> None:
    only_124 = offer(["550.127.08"], ["12.4.1"], [("9.5.1.17", "12")], [("2.21.5", "12.4")])
    only_126 = offer(["570.124.06"], ["12.6.3"], [("9.5.1.17", "12")], [("2.23.4", "12.6")])
    with pytest.raises(resolving.Unmet) as unmet:
        resolve({"debian12": only_124, "rhel9": only_126}, CUDA_WHEELS)
    reasons = {b.repository: b.reason for b in unmet.value.blockers}
    assert reasons == {
        "debian12": "debian12 carries CUDA 12.4.1, which some other OS here does not",
        "rhel9": "rhel9 carries CUDA 12.6.3, which some other OS here does not",
    }


# -- the command, its hosts faked ---------------------------------------------------------------------------


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "inventory.ini").write_text(
        "[gpu_nodes]\nnode1 ansible_host=10.0.0.1\nnode2 ansible_host=10.0.0.2\n"
        "[gpu_nodes:vars]\npython_env_allow_cpu_torch=true\n"
    )
    return tmp_path


def lock_resolve(*args: str, cwd: Path, columns: int = 80) -> in_process.Result:
    env = {"GPUPROV_STATE_DIR": str(cwd / "state"), "COLUMNS": str(columns)}
    return in_process.gpuprov("lock", "resolve", *args, cwd=cwd, env=env)


def fake_metadata(
    monkeypatch: pytest.MonkeyPatch, rhel9: Offer = SANDBOX_LIKE, node2_gpus: tuple[PciGpu, ...] = ()
) -> list[str]:
    asked: list[str] = []

    def gather(inventory: hosts.Inventory) -> metadata.Gathered:
        asked.extend(inventory.names)
        node1, node2 = inventory.hosts
        return metadata.Gathered(
            hosts=[
                metadata.HostOs(node1, "Debian GNU/Linux 12", "debian12"),
                metadata.HostOs(node2, "Rocky Linux 9.4", "rhel9", node2_gpus),
            ],
            offers={"debian12": SANDBOX_LIKE, "rhel9": rhel9},
            torch=set(CPU_ONLY.found),
            torch_where=CPU_ONLY.where,
        )

    monkeypatch.setattr(metadata, "gather", gather)
    return asked


def test_the_lock_is_written_with_its_reasons_and_passes_the_lock_check(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_metadata(monkeypatch)
    result = lock_resolve("inventory.ini", "-o", "lock.yml", cwd=work)
    assert result.returncode == 0, result.stderr
    text = (work / "lock.yml").read_text()
    stack = yaml.safe_load(text)["gpu_stack"]
    assert stack["cuda_version"] == "12.6.3" and stack["pytorch_cuda_tag"] == "cpu"
    assert all(isinstance(value, str) for value in stack.values())
    assert lock.check(stack) == []
    assert "#   " in text or "# the newest" in text  # each field has its reason above it
    assert "Warning: driver_branch 570 (production branch) reached its end of life in February 2026" in text
    assert not [p for p in work.iterdir() if p.name.startswith(".lock.yml.")]  # no temporary file left
    # the same again: refused, the file kept; --force replaces it
    (work / "lock.yml").write_text("mine\n")
    again = lock_resolve("inventory.ini", "-o", "lock.yml", cwd=work)
    assert again.returncode == 2 and "lock.yml exists; give another --output, or --force" in again.stderr
    assert (work / "lock.yml").read_text() == "mine\n"
    assert lock_resolve("inventory.ini", "-o", "lock.yml", "--force", cwd=work).returncode == 0
    assert yaml.safe_load((work / "lock.yml").read_text())["gpu_stack"] == stack


def test_a_repository_that_cannot_meet_it_fails_one_line_per_host(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_metadata(
        monkeypatch, rhel9=offer(["550.127.08"], ["12.4.1"], [("9.5.1.17", "12")], [("2.21.5", "12.4")])
    )
    result = lock_resolve("inventory.ini", "--cuda", "12.6", cwd=work)
    assert result.returncode == 7, result.stderr
    shown = result.stdout + result.stderr
    assert "Lock resolve: no lock written" in shown
    assert "Rocky Linux 9.4 (rhel9): no lock fits: rhel9 carries no CUDA" in shown  # the table wraps the rest
    assert "Debian GNU/Linux 12 (debian12): no lock fits: debian12" in shown
    assert not (work / "gpu_stack.yml").exists()


def test_hosts_whose_gpus_cannot_run_the_newest_lock_get_their_line(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A V100 (10de:1db1, Volta) cannot run the open kernel modules: nothing is written, and its line says
    what to set, as bootstrap's preflight would (docs/gpu-generations.md)."""
    fake_metadata(monkeypatch, node2_gpus=(PciGpu("0000:18:00.0", "1db1"),))
    result = lock_resolve("inventory.ini", cwd=work, columns=400)
    assert result.returncode == 7, result.stderr
    shown = result.stdout + result.stderr
    assert (
        "node2" in shown
        and "the newest lock does not fit: 1x Tesla V100 SXM2 16GB (Volta, 10de:1db1)" in shown
    )
    assert "driver_flavor" in shown and "node1 " not in shown.split("no lock written", 1)[1]
    assert not (work / "gpu_stack.yml").exists()
    assert lock_resolve("inventory.ini", "--driver-flavor", "proprietary", cwd=work).returncode == 0


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--cuda", "99.9"], "--cuda 99.9: gpuprov's compatibility table has no such release"),
        (["--torch", "2"], "--torch '2' is not valid: give a PyTorch minor such as \"2.9\""),
        (
            ["--driver-branch", "999"],
            "--driver-branch 999: gpuprov's compatibility table has no such release",
        ),
        (["-o", "nowhere/lock.yml"], "--output nowhere/lock.yml: the directory nowhere does not exist"),
    ],
)
def test_bad_input_is_one_line_before_any_host(
    work: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], expected: str
) -> None:
    asked = fake_metadata(monkeypatch)
    result = lock_resolve("inventory.ini", *args, cwd=work)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].removeprefix("error: ").startswith(expected), lines[0]
    assert asked == []


def test_releases_newer_than_the_table_are_named() -> None:
    ahead = offer(["550.127.08", "700.10.01"], ["12.4.1", "14.0.1"], [], [])
    assert resolving.unlisted(TABLE, {"ubuntu2404": ahead, "debian12": SANDBOX_LIKE}) == [
        f"ubuntu2404 carries driver 700.10.01, newer than the table's {newest('drivers')}",
        f"ubuntu2404 carries CUDA 14.0.1, newer than the table's {newest('cuda')}",
    ]


def newest(kind: str) -> str:
    return max((str(r["version"]) for r in TABLE[kind]), key=resolving.key)
