"""site.yml's container runtime play: Ansible selects it for the GPU nodes, and the switch decides whether
the role runs. The play itself is run on this machine (`-c local`): switched off it skips its one task;
switched on it enters the role, whose settings check stops it at once (an engine that does not exist), so
nothing is installed here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from gpuprov import resources
from gpuprov.ansible import arguments

BIN = Path(sys.executable).parent
PLAY = "Install the container runtime"
TASK = "Apply the container_runtime role where it is switched on"


def ansible_playbook(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "ansible-playbook"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "ANSIBLE_ROLES_PATH": str(resources.data_dir("roles")), "ANSIBLE_NOCOLOR": "1"},
    )


def test_site_selects_the_container_runtime_play_for_the_gpu_nodes(tmp_path: Path) -> None:
    inventory = resources.data_dir("inventory") / "sample" / "inventory.ini"
    proc = ansible_playbook(
        "--list-hosts",
        "--list-tasks",
        "-i",
        str(inventory),
        str(arguments.playbook_path("site.yml")),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    play = proc.stdout.split(f": {PLAY}", 1)[1].split("play #", 1)[0]
    assert "gpu01" in play and "gpu02" in play
    assert TASK in play


def run_site_play(tmp_path: Path, **extra: object) -> subprocess.CompletedProcess[str]:
    plays = yaml.safe_load(arguments.playbook_path("site.yml").read_text())
    play = next(p for p in plays if p.get("name") == PLAY)
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{**play, "hosts": "localhost", "become": False}], sort_keys=False))
    variables = {"ansible_python_interpreter": sys.executable, **extra}
    return ansible_playbook(
        "-i", "localhost,", "-c", "local", str(playbook), "-e", json.dumps(variables), cwd=tmp_path
    )


def test_switched_off_the_play_skips_the_role(tmp_path: Path) -> None:
    proc = run_site_play(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"TASK [{TASK}]" in proc.stdout and "skipping: [localhost]" in proc.stdout
    assert "gpuprov_platform :" not in proc.stdout and "container_runtime :" not in proc.stdout


def test_switched_on_the_play_runs_the_role(tmp_path: Path) -> None:
    proc = run_site_play(tmp_path, container_runtime_enabled=True, container_runtime_engine="none-such")
    assert proc.returncode != 0
    # Entered the role: its dependency's OS check ran, and on a supported OS its own settings check refused.
    assert "TASK [gpuprov_platform : Refuse an operating system" in proc.stdout, proc.stdout
    assert (
        "container_runtime_engine must be docker or podman (is none-such)" in proc.stdout
        or "which gpuprov's roles do not support" in proc.stdout
    ), proc.stdout
