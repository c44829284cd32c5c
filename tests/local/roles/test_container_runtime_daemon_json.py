"""container_runtime merges gpuprov's keys into the site's /etc/docker/daemon.json, never writing it whole:
the role's merge task runs here on localhost with a site's file and `dockerd --version` as inputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.local.roles.local_play import role_task, run_cases

SITE = {
    "data-root": "/srv/docker",
    "registry-mirrors": ["https://mirror.example.org"],
    "log-driver": "json-file",
    "log-opts": {"max-size": "10m", "max-file": "3"},
    "bip": "172.26.0.1/16",
    "live-restore": True,
    "features": {"buildkit": True},
    "exec-opts": ["native.cgroupdriver=systemd", "native.umask=normal"],
}
NVIDIA = {"nvidia": {"args": [], "path": "nvidia-container-runtime"}}
# `dockerd --version` of Debian 12's docker.io (run here from the mirror's docker.io_20.10.24+dfsg1-1+deb12u1
# package), and a Docker 28 line in the same format (the role reads only the major version).
DOCKER_20 = "Docker version 20.10.24+dfsg1, build 5d6db84"
DOCKER_28 = "Docker version 28.5.1, build 0000000"


def merged(tmp_path: Path, cases: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    settings = {
        "container_runtime_cgroup_driver": "cgroupfs",
        "container_runtime_storage_driver": "",
        "container_runtime_oci_runtime": "",
        "container_runtime_docker_cdi": False,
        "container_runtime_docker_classic_store": True,
    }
    tasks = [
        role_task("container_runtime", "docker.yml", "Work out the merged daemon.json"),
        {
            "name": "Keep the result",
            "delegate_to": "localhost",
            "ansible.builtin.copy": {
                "content": "{{ {'merged': __container_runtime_daemon_json, 'write': "
                "__container_runtime_daemon_json != __container_runtime_daemon_json_site} | to_json }}",
                "dest": f"{tmp_path}/{{{{ inventory_hostname }}}}.json",
                "mode": "0644",
            },
        },
    ]
    inputs = {
        name: {
            **settings,
            **case,
            "__container_runtime_dockerd_version": {"stdout": case.pop("dockerd", DOCKER_20)},
        }
        for name, case in cases.items()
    }
    results = run_cases(tmp_path, tasks, inputs)
    assert not any(r.failed for r in results.values()), {n: r.output for n, r in results.items()}
    return {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in cases}


def test_site_keys_survive_and_only_gpuprovs_keys_change(tmp_path: Path) -> None:
    site = json.dumps(SITE)
    done = {
        **SITE,
        "runtimes": NVIDIA,
        "exec-opts": ["native.umask=normal", "native.cgroupdriver=cgroupfs"],
        "features": {"buildkit": True, "containerd-snapshotter": False},
    }
    result = merged(
        tmp_path,
        {
            "old": {"__container_runtime_daemon_json_text": site},
            "new": {"__container_runtime_daemon_json_text": site, "dockerd": DOCKER_28},
            "empty": {"__container_runtime_daemon_json_text": ""},
            "done": {"__container_runtime_daemon_json_text": json.dumps(done), "dockerd": DOCKER_28},
            "keep_store": {
                "__container_runtime_daemon_json_text": json.dumps(
                    {"features": {"containerd-snapshotter": True}}
                ),
                "container_runtime_docker_classic_store": False,
                "dockerd": DOCKER_28,
            },
        },
    )
    # Docker 20.10 has no containerd-snapshotter key: left out there.
    assert result["old"] == {
        "merged": {
            **SITE,
            "runtimes": NVIDIA,
            "exec-opts": ["native.umask=normal", "native.cgroupdriver=cgroupfs"],
        },
        "write": True,
    }
    assert result["new"] == {"merged": done, "write": True}
    assert result["empty"] == {
        "merged": {"runtimes": NVIDIA, "exec-opts": ["native.cgroupdriver=cgroupfs"]},
        "write": True,
    }
    assert result["done"] == {"merged": done, "write": False}  # nothing to write, no restart
    assert result["keep_store"]["merged"]["features"] == {"containerd-snapshotter": True}
