"""The roles' state manifests (/var/lib/gpuprov/managed/<role>.json, each role's last task) on the Debian 12
hosts first_bootstrap made ready: each one is well formed, and together they list everything the roles set.

What a role set is read from the bootstrap run's own events (job_events/ of its run directory): each task
that ran on a host with its module's arguments and result. A task that writes a file (copy, template, file,
lineinfile, deb822_repository, ...), installs or removes a package, holds one (apt-mark hold), enables a unit,
loads a module, sets a sysctl key or changes the firewall must be covered by the manifest of its role
(event_data.role) or of a role that role depends on (meta/main.yml): a missed item is drift that
`gpuprov bootstrap`'s drift check would leave unrepaired (docs/developers/adding-a-role.md, "Record what the
role manages"). command/shell tasks other than apt-mark hold are not read here: their state is listed by
reading the role (the same page says how).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from tests.integration.bootstrap.conftest import ROOT, on_node
from tests.integration.conftest import BootstrapRun, Sandbox

pytestmark = pytest.mark.integration

MANAGED = "/var/lib/gpuprov/managed"
LIST_KEYS = ("files", "listings", "packages", "services", "sysctl", "modules")
KEYS = {"schema", "role", "firewall", *LIST_KEYS}
# Where ansible.builtin's and community.general's modules write when the task names no file.
SYSCTL_FILE = "/etc/sysctl.conf"  # sysctl's sysctl_file default
VERSIONLOCK_LIST = "/etc/dnf/plugins/versionlock.list"  # dnf versionlock plugin's locklist default
YUM_REPOS = "/etc/yum.repos.d"  # yum_repository's reposdir default


@dataclass(frozen=True)
class Claim:
    """State one task set; kind: file, dir, package, held, service, module, sysctl or firewall."""

    kind: str
    value: str
    task: str


@pytest.fixture(scope="module")
def bootstrapped(deb_sandbox: Sandbox, first_bootstrap: BootstrapRun) -> tuple[Sandbox, Path]:
    assert first_bootstrap.returncode == 0, f"bootstrap of node1 and node2 failed:\n{first_bootstrap.stderr}"
    run_dir = Path(str(first_bootstrap.summary["run_dir"]))
    # Runs rotate (ansible/runs.py KEEP_RUNS): this module must run before 20 more runs in the session.
    assert (run_dir / "job_events").is_dir(), f"{run_dir} was rotated away before this test read it"
    return deb_sandbox, run_dir


def read_manifests(sandbox: Sandbox, node: str) -> dict[str, str]:
    """{file name: text} of the node's manifests."""
    script = (
        "import glob, json, os, sys; json.dump({os.path.basename(p): open(p).read() "
        f"for p in glob.glob('{MANAGED}/*.json')}}, sys.stdout)"
    )
    proc = on_node(sandbox, node, f'python3 -c "{script}"')
    assert proc.returncode == 0, proc.stderr
    found: dict[str, str] = json.loads(proc.stdout)
    return found


def manifest_problems(name: str, text: str) -> list[str]:
    """What is wrong with one manifest file: the schema of docs/developers/adding-a-role.md."""
    if any(mark in text for mark in ("{{", "{%", "{#")):
        return [f"{name}: Jinja left in it"]
    try:
        manifest = json.loads(text)
    except ValueError as error:
        return [f"{name}: not JSON ({error})"]
    problems = []
    if manifest.get("schema") != 1:
        problems.append(f"{name}: schema is {manifest.get('schema')!r}, not 1")
    if manifest.get("role") != name.removesuffix(".json") or not (ROOT / "roles" / name[:-5]).is_dir():
        problems.append(f"{name}: role is {manifest.get('role')!r}, not the file's role")
    problems += [f"{name}: unknown key {key!r}" for key in sorted(set(manifest) - KEYS)]
    for key in LIST_KEYS:
        value = manifest.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            problems.append(f"{name}: {key} is not a list of strings: {value!r}")
        elif key in ("files", "listings"):
            problems += [
                f"{name}: {key} entry {item!r} is not absolute" for item in value if not item.startswith("/")
            ]
    if not isinstance(manifest.get("firewall", False), bool):
        problems.append(f"{name}: firewall is not true or false")
    return problems


def depends_on(role: str) -> set[str]:
    """The role and every role it depends on (meta/main.yml), transitively."""
    found, todo = set(), [role]
    while todo:
        current = todo.pop()
        if current in found:
            continue
        found.add(current)
        meta = yaml.safe_load((ROOT / "roles" / current / "meta" / "main.yml").read_text()) or {}
        for dependency in meta.get("dependencies") or []:
            todo.append(dependency["role"] if isinstance(dependency, dict) else dependency)
    return found


def task_results(run_dir: Path, host: str) -> Iterator[tuple[str, str, str, dict[str, Any], dict[str, Any]]]:
    """(role, module's short name, task name, module arguments, result) of each task that ran on the host,
    one per loop item."""
    for path in (run_dir / "job_events").glob("*.json"):
        event = json.loads(path.read_text())
        data = event.get("event_data", {})
        if event.get("event") != "runner_on_ok" or data.get("host") != host or not data.get("role"):
            continue
        action = str(data.get("resolved_action") or data.get("task_action")).rsplit(".", 1)[-1]
        result = data.get("res") or {}
        for item in result.get("results") or [result]:
            arguments = (item.get("invocation") or {}).get("module_args") or {}
            yield data["role"], action, str(data.get("task")), arguments, item


def names(value: object) -> list[str]:
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def claims(action: str, task: str, args: dict[str, Any], result: dict[str, Any]) -> list[Claim]:
    """The state one task result set, by what its module does."""

    def each(kind: str, values: list[str]) -> list[Claim]:
        return [Claim(kind, value, task) for value in values if value]

    if action in (
        "copy",
        "template",
        "get_url",
        "assemble",
        "lineinfile",
        "blockinfile",
        "replace",
        "ini_file",
    ):
        return each("file", names(result.get("dest") or args.get("dest") or args.get("path")))
    if action == "file":
        kind = "dir" if args.get("state") == "directory" else "file"
        return each(kind, names(args.get("path") or args.get("dest")))
    if action == "unarchive":
        return each("dir", names(args.get("dest")))
    if action in ("deb822_repository", "apt_repository", "apt_key"):
        return each(
            "file",
            names(result.get("dest")) + names(result.get("key_filename")) + names(args.get("keyring"))
            + names(result.get("sources_added")) + names(result.get("sources_removed")),
        )  # fmt: skip
    if action == "yum_repository":
        directory = args.get("reposdir") or YUM_REPOS
        return each("file", [f"{directory}/{args.get('file') or args.get('name')}.repo"])
    if action == "dnf_versionlock":
        return each("file", [VERSIONLOCK_LIST])
    if action == "rpm_key" and args.get("state", "present") == "present" and args.get("fingerprint"):
        return each("package", ["gpg-pubkey"])  # rpm's name for every imported key (the id is its version)
    if action in ("apt", "dnf", "yum", "package"):
        return each("package", names(args.get("name")))
    if action in ("systemd_service", "systemd", "service"):
        return each("service", names(args.get("name")))
    if action == "modprobe":
        persistent = (
            [f"/etc/modules-load.d/{args['name']}.conf"] if args.get("persistent") == "present" else []
        )
        return each("module", names(args.get("name"))) + each("file", persistent)
    if action == "sysctl":
        return each("sysctl", names(args.get("name"))) + each(
            "file", [args.get("sysctl_file") or SYSCTL_FILE]
        )
    if action in ("ufw", "firewalld"):
        return each("firewall", ["rules"])
    if action == "authorized_key":
        return each("file", names(result.get("keyfile")))
    if action in ("command", "shell"):
        argv = names(args.get("argv")) or str(args.get("_raw_params") or args.get("cmd") or "").split()
        if argv[:2] == ["apt-mark", "hold"]:
            return each("held", argv[2:])
    return []


def path_covered(path: str, patterns: list[str]) -> bool:
    """Whether a glob of `files` or `listings` matches the path (a glob component matches one name)."""
    return any(PurePosixPath(path).match(pattern) for pattern in patterns)


def dir_covered(directory: str, patterns: list[str]) -> bool:
    """A directory the role makes is covered by an entry for it or for anything under it."""
    below = directory.rstrip("/") + "/"
    return path_covered(directory, patterns) or any(pattern.startswith(below) for pattern in patterns)


def package_covered(spec: str, packages: list[str]) -> bool:
    """apt's "name=version", apt-get's "name-" (remove), dnf's "name-version": the name is listed."""
    name = spec.split("=", 1)[0].removesuffix("-")
    return any(
        name == package
        or (name.startswith(package + "-") and name[len(package) + 1 : len(package) + 2] in "0123456789*")
        for package in packages
    )


def uncovered(claim: Claim, manifests: list[dict[str, Any]]) -> bool:
    def entries(*keys: str) -> list[str]:
        return [entry for manifest in manifests for key in keys for entry in manifest.get(key, [])]

    if claim.kind in ("file", "dir") and (claim.value == MANAGED or claim.value.startswith(MANAGED + "/")):
        return False  # the manifests themselves, and gpuprov_platform's folder of them
    if claim.kind == "file":
        return not path_covered(claim.value, entries("files", "listings"))
    if claim.kind == "dir":
        return not dir_covered(claim.value, entries("files", "listings"))
    if claim.kind in ("package", "held"):
        return not package_covered(claim.value, entries("packages"))
    if claim.kind == "firewall":
        return not any(manifest.get("firewall") for manifest in manifests)
    key = {"service": "services", "module": "modules", "sysctl": "sysctl"}[claim.kind]
    value = claim.value if claim.kind != "service" else claim.value.removesuffix(".service")
    return value not in [entry.removesuffix(".service") for entry in entries(key)]


@pytest.mark.parametrize("node", ["node1", "node2"])
def test_every_manifest_is_well_formed(bootstrapped: tuple[Sandbox, Path], node: str) -> None:
    sandbox, _ = bootstrapped
    found = read_manifests(sandbox, node)
    assert found, f"{node} has no manifest in {MANAGED}"
    problems = [problem for name, text in sorted(found.items()) for problem in manifest_problems(name, text)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("node", ["node1", "node2"])
def test_the_manifests_cover_what_the_roles_set(bootstrapped: tuple[Sandbox, Path], node: str) -> None:
    sandbox, run_dir = bootstrapped
    manifests = {
        name.removesuffix(".json"): json.loads(text) for name, text in read_manifests(sandbox, node).items()
    }
    problems: set[str] = set()
    checked = 0
    for role, action, task, args, result in task_results(run_dir, node):
        for claim in claims(action, task, args, result):
            checked += 1
            # A hold is asked for by the role that installed the package (nvidia_repository's hold.yml).
            scope = manifests.values() if claim.kind == "held" else [
                manifests[name] for name in sorted(depends_on(role)) if name in manifests
            ]  # fmt: skip
            if uncovered(claim, list(scope)):
                where = (
                    "any manifest" if claim.kind == "held" else f"the manifests of {sorted(depends_on(role))}"
                )
                if claim.kind != "held" and role not in manifests:
                    where += f" ({role} wrote none)"
                problems.add(
                    f"{node}: {role}: task {claim.task!r} sets {claim.kind} {claim.value}, not in {where}"
                )
    assert checked > 0, f"no task of {run_dir} set anything on {node}: the events were not read"
    assert not problems, "\n".join(sorted(problems))
