"""What the sandbox mirror holds and when it is rebuilt, without building one: the CUDA releases each
repository carries, the content hash, one-line tool failures, and pruning old mirrors."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuprov import lock
from gpuprov.errors import EnvironmentProblem, GpuprovError
from gpuprov.sandbox import mirror
from gpuprov.sandbox.standins import CATALOGUE, NcclRelease


def test_carrying_keeps_the_builds_for_the_carried_cuda_only() -> None:
    only_12_4 = CATALOGUE.carrying({"12.4.1"})
    assert [c.version for c in only_12_4.cuda] == ["12.4.1"]
    assert [(c.version, c.cuda) for c in only_12_4.cudnn] == [("9.5.1.17", "12")]  # cuDNN 9: per CUDA major
    assert [(n.version, n.cuda) for n in only_12_4.nccl] == [("2.21.5", "12.4")]
    assert only_12_4.drivers == CATALOGUE.drivers and only_12_4.dcgm == CATALOGUE.dcgm
    assert CATALOGUE.carrying(set()).cudnn == ()


def test_repository_cuda_reads_the_table_and_refuses_a_missing_repository() -> None:
    table = lock.load_table()
    carried = mirror.repository_cuda(table)
    assert carried["debian12"] == frozenset(table["os_repositories"]["debian12"]["cuda"])
    assert "12.2.2" not in carried["debian12"] and "12.2.2" in carried["rhel9"]
    without = {"os_repositories": {k: v for k, v in table["os_repositories"].items() if k != "ubuntu2004"}}
    with pytest.raises(GpuprovError, match=r"os_repositories\.ubuntu2004"):
        mirror.repository_cuda(without)


def test_content_hash_follows_the_repositories_cuda() -> None:
    carried = mirror.repository_cuda()
    base = mirror.content_hash(CATALOGUE, None, carried)
    assert mirror.content_hash(CATALOGUE, None) == base
    more = {**carried, "debian12": carried["debian12"] | {"12.2.2"}}
    assert mirror.content_hash(CATALOGUE, None, more) != base


def test_content_hash_follows_catalogue_and_wheel_spec() -> None:
    base = mirror.content_hash(CATALOGUE, mirror.WHEELS)
    assert re.fullmatch(r"[0-9a-f]{12}", base)
    assert mirror.content_hash(CATALOGUE, mirror.WHEELS) == base
    more_nccl = dataclasses.replace(CATALOGUE, nccl=(*CATALOGUE.nccl, NcclRelease("2.27.3", "12.9")))
    assert mirror.content_hash(more_nccl, mirror.WHEELS) != base
    assert mirror.content_hash(CATALOGUE, None) != base


def test_content_hash_covers_every_file_of_the_standins_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = {name for name, _ in mirror.builder_sources()}
    assert {
        "mirror.py",
        "rpm_modules.py",
        "standins/recipes.py",
        "standins/shell.py",
        "standins/programs/nvidia-smi.sh",
    } <= names
    package_files = {
        f"standins/{p.relative_to(mirror.STANDINS_DIR).as_posix()}"
        for p in mirror.STANDINS_DIR.rglob("*")
        if p.suffix in (".py", ".sh")
    }
    assert package_files <= names

    copy = tmp_path / "standins"
    shutil.copytree(mirror.STANDINS_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    base = mirror.content_hash(CATALOGUE, None)
    monkeypatch.setattr(mirror, "STANDINS_DIR", copy)
    assert mirror.content_hash(CATALOGUE, None) == base  # the same files elsewhere: the same hash
    program = copy / "programs" / "nv-hostengine.sh"
    program.write_bytes(program.read_bytes() + b"# changed\n")
    assert mirror.content_hash(CATALOGUE, None) != base


def test_a_failing_tool_is_one_line_not_a_traceback() -> None:
    with pytest.raises(GpuprovError, match=r"^building the sandbox mirror: 'sh -c' failed: it broke$"):
        mirror._run(["sh", "-c", "echo detail >&2; echo it broke >&2; exit 3"])
    with pytest.raises(EnvironmentProblem, match="cannot run no-such-tool-gpuprov"):
        mirror._run(["no-such-tool-gpuprov"])


def test_pruning_keeps_the_newest_mirrors_and_every_one_a_sandbox_serves(tmp_path: Path) -> None:
    # Oldest first: mtimes 1..5. A sandbox made before the last two builds still serves the oldest.
    built = [tmp_path / f"{n:012x}" for n in range(1, 6)]
    for age, root in enumerate(built, start=1):
        root.mkdir()
        os.utime(root, (age, age))
    (tmp_path / "build-unfinished").mkdir()  # not a finished mirror's name: never touched here
    mirror._prune(tmp_path, keep=2, served=frozenset({built[0]}))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [built[0].name, built[3].name, built[4].name, "build-unfinished"]
    )


def test_served_mirrors_are_read_from_the_mirror_containers_label(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, ...]] = []

    def fake_docker(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        asked.append(args)
        return subprocess.CompletedProcess(args, 0, "/c/mirror/aaaaaaaaaaaa\n/c/mirror/bbbbbbbbbbbb\n", "")

    monkeypatch.setattr(mirror.docker, "run", fake_docker)
    assert mirror.served_mirrors() == {Path("/c/mirror/aaaaaaaaaaaa"), Path("/c/mirror/bbbbbbbbbbbb")}
    assert asked == [
        ("ps", "-a", "--filter", "label=gpuprov.mirror.root", "--format", '{{.Label "gpuprov.mirror.root"}}')
    ]


def test_served_mirrors_is_empty_when_docker_cannot_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_engine(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(args, 1, "", "Cannot connect to the Docker daemon")

    monkeypatch.setattr(mirror.docker, "run", no_engine)
    assert mirror.served_mirrors() == frozenset()
