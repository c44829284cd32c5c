"""The nodes' engine store volumes: created (labelled) before the node, mounted where Docker and Podman keep
their images, and removed by `down` and by a failed `up`, with a fake `docker` recording what is asked."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpuprov.errors import Conflict
from gpuprov.sandbox import cluster, docker

Call = tuple[str, ...]


def _fake_docker(monkeypatch: pytest.MonkeyPatch, listed: dict[Call, str]) -> list[Call]:
    """docker.run answering `listed` commands with their stdout, everything else with nothing."""
    calls: list[Call] = []

    def run(*args: str, check: bool = True, **_: object) -> subprocess.CompletedProcess[str]:
        calls.append(args)
        return subprocess.CompletedProcess(["docker", *args], 0, listed.get(args, ""), "")

    monkeypatch.setattr(docker, "run", run)
    return calls


def test_a_node_is_created_with_its_two_store_volumes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls = _fake_docker(monkeypatch, {})
    files = cluster.SandboxFiles(tmp_path / "sb")
    rollback = cluster._Rollback("sb", new_sandbox=True, state_dir=files.root)
    mounts = cluster._engine_store_mounts("sb", "node2", files, rollback)

    assert rollback.volumes == ["gpuprov-sb-node2-docker", "gpuprov-sb-node2-containers"]
    created = [c for c in calls if c[:2] == ("volume", "create")]
    assert [c[-1] for c in created] == rollback.volumes
    assert all(c[2:4] == ("--label", "gpuprov.sandbox=sb") for c in created)
    assert mounts == [
        "--mount", "type=volume,source=gpuprov-sb-node2-docker,target=/var/lib/docker",
        "--mount", "type=volume,source=gpuprov-sb-node2-containers,target=/var/lib/containers",
    ]  # fmt: skip


def test_a_failed_up_removes_the_volumes_after_the_containers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    label = "label=gpuprov.sandbox=sb"
    calls = _fake_docker(
        monkeypatch,
        {
            ("ps", "-aq", "--filter", label): "c1\n",
            ("volume", "ls", "-q", "--filter", label): "gpuprov-sb-node1-docker\n",
        },
    )
    rollback = cluster._Rollback("sb", new_sandbox=True, state_dir=tmp_path / "sb")
    rollback.volumes.append("gpuprov-sb-node2-docker")  # recorded, then the create failed half-way
    rollback.undo()
    removals = [c for c in calls if c[0] == "rm" or c[:2] == ("volume", "rm")]
    assert removals == [
        ("rm", "-f", "c1"),
        ("volume", "rm", "-f", "gpuprov-sb-node2-docker", "gpuprov-sb-node1-docker"),
    ]


def test_down_removes_the_sandbox_volumes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path))
    monkeypatch.setattr(docker, "ensure_engine", lambda: None)
    label = "label=gpuprov.sandbox=sb"
    calls = _fake_docker(
        monkeypatch,
        {
            ("ps", "-aq", "--filter", label): "c1 c2\n",
            ("volume", "ls", "-q", "--filter", label): "v1\nv2\n",
        },
    )
    assert cluster.down("sb") is True
    assert ("rm", "-f", "-v", "c1", "c2") in calls
    assert calls.index(("volume", "rm", "-f", "v1", "v2")) > calls.index(("rm", "-f", "-v", "c1", "c2"))


def test_a_foreign_volume_of_a_node_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(docker, "inspect", lambda kind, name: {"Labels": None} if kind == "volume" else None)
    with pytest.raises(Conflict, match="a docker volume named 'gpuprov-sb-node1-docker' already exists"):
        cluster._refuse_foreign("sb", "volume", cluster.engine_volume_name("sb", "node1", "docker"))
