"""Each role's record of what it manages (docs/developers/adding-a-role.md, "Record what the role manages"):
the last task of tasks/main.yml writes `__<role>_managed` (vars/main.yml) to
/var/lib/gpuprov/managed/<role>.json in exactly the documented shape, and the variable has schema 1 and the
role's name. What the manifests list is checked on a bootstrapped sandbox
(tests/integration/bootstrap/test_managed_manifests.py)."""

from __future__ import annotations

import pytest
import yaml

from gpuprov import resources

ROLES = resources.data_dir("roles")
# Every role but gpuprov_platform, which only makes the manifests' folder.
WITH_MANIFEST = [
    "container_runtime",
    "cuda",
    "cudnn",
    "mpi",
    "nccl",
    "network_tuning",
    "nvidia_driver",
    "nvidia_repository",
    "python_env",
    "slurm",
    "slurm_pyxis",
]
LIST_KEYS = {"files", "listings", "packages", "services", "sysctl", "modules"}


def managed(role: str) -> object:
    variables = ROLES / role / "vars" / "main.yml"
    found = (yaml.safe_load(variables.read_text()) or {}) if variables.is_file() else {}
    return found.get(f"__{role}_managed")


def expected_task(role: str) -> dict[str, object]:
    return {
        "name": "Record what this role manages (gpuprov bootstrap's drift check reads it)",
        "ansible.builtin.copy": {
            "dest": f"/var/lib/gpuprov/managed/{role}.json",
            "content": "{{ __" + role + "_managed | to_nice_json(sort_keys=true) }}\n",
            "owner": "root",
            "group": "root",
            "mode": "0644",
        },
    }


def roles_with_manifest() -> list[str]:
    return sorted(p.name for p in ROLES.iterdir() if (p / "tasks" / "main.yml").is_file() and managed(p.name))


def test_the_roles_that_record_their_state_are_found() -> None:
    assert set(WITH_MANIFEST) <= set(roles_with_manifest())


def last_task(role: str, tasks_file: str = "main.yml") -> dict[str, object]:
    """The last task the role runs: through a last include_tasks of a static file, that file's last task
    (nvidia_repository writes its manifest at the end of setup.yml, which runs once per host and run)."""
    last: dict[str, object] = yaml.safe_load((ROLES / role / "tasks" / tasks_file).read_text())[-1]
    included = last.get("ansible.builtin.include_tasks")
    if isinstance(included, str) and "{" not in included:
        return last_task(role, included)
    return last


@pytest.mark.parametrize("role", roles_with_manifest())
def test_the_last_task_writes_the_manifest(role: str) -> None:
    assert last_task(role) == expected_task(role)


@pytest.mark.parametrize("role", roles_with_manifest())
def test_the_manifest_names_its_schema_and_role(role: str) -> None:
    manifest = managed(role)
    assert isinstance(manifest, dict)
    assert (manifest["schema"], manifest["role"]) == (1, role)
    assert set(manifest) <= {"schema", "role", "firewall", *LIST_KEYS}
    # Each list is a Jinja expression or a literal list: rendered, the task writes lists of strings.
    for key in LIST_KEYS & set(manifest):
        assert isinstance(manifest[key], (str, list)), key
