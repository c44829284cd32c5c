"""Which site.yml tag re-applies a role, read from the roles themselves.

site.yml tags each role it applies with the role's name (`--tags nccl` applies nccl and, through meta
dependencies, nvidia_repository and gpuprov_platform). A role without a tag of its own (a dependency, or a
role another role includes: slurm_pyxis from slurm) is re-applied by every tagged role that reaches it
through meta/main.yml's dependencies or an include_role/import_role in its tasks, transitively.

A tagged role whose own files read other hosts of the play (`ansible_play_hosts`, `hostvars[`, `groups[`: the
firewall's peer list, mpi's known_hosts, Slurm's node list) is "cluster-wide": a run that re-applies it runs
on every host of the inventory, not only the drifted ones, so that its view of the cluster stays whole.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from gpuprov import paths
from gpuprov.ansible import tags as playbook_tags

MANIFEST_MARK = "/var/lib/gpuprov/managed/"  # the path every role's last task writes its manifest to
# Roles that need no manifest: gpuprov_platform checks the OS and makes the manifests' folder, nothing else;
# that folder gone takes every manifest with it, which is drift of every role. Any other role without a
# manifest turns the drift check off (every role runs), and says so.
NO_STATE = frozenset({"gpuprov_platform"})
_INCLUDED = re.compile(r"(?:include_role|import_role):\s*\n\s+name:\s*([A-Za-z0-9_]+)")
_CLUSTER = re.compile(r"ansible_play_hosts|hostvars\[|groups\[")


@dataclass(frozen=True)
class RoleMap:
    tags_of: dict[str, set[str]]  # role -> the site.yml tags that re-apply it
    cluster_wide: set[str]  # tags whose roles read the other hosts of the play
    unrecorded: list[str]  # roles that write no manifest: their state is not checked


def load(playbook: Path, roles_path: Path, code_digest: str) -> RoleMap:
    """build()'s map, kept in the state dir under the digest of roles/ and playbooks/ and of the playbook run
    (reading every role's YAML costs about 0.3 CPU-s, more than the rest of a no-drift re-run on the
    controller). The playbook is in the key: another one (a test's, outside playbooks/) tags other roles."""
    try:
        played = playbook.read_bytes()
    except OSError:
        played = b""
    key = hashlib.sha256(f"{code_digest}\n{playbook.resolve()}\n".encode() + played).hexdigest()[:32]
    cache = paths.state_dir() / "drift" / f"roles-{key}.json"
    try:
        data = json.loads(cache.read_text())
        return RoleMap(
            {k: set(v) for k, v in data["tags_of"].items()}, set(data["cluster_wide"]), data["unrecorded"]
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    found = build(playbook, roles_path)
    with contextlib.suppress(OSError):  # not kept: the next run builds it again
        kept = {k: sorted(v) if isinstance(v, set) else v for k, v in asdict(found).items()}
        paths.write_private_json(cache, kept, default=sorted)
    return found


def _yaml_files(role: Path) -> list[Path]:
    return sorted(p for p in role.rglob("*") if p.suffix in (".yml", ".yaml", ".j2") and p.is_file())


def _dependencies(role: Path) -> set[str]:
    try:
        meta = yaml.safe_load((role / "meta" / "main.yml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return set()
    found = set()
    for entry in meta.get("dependencies", []) if isinstance(meta, dict) else []:
        name: Any = entry.get("role") if isinstance(entry, dict) else entry
        if isinstance(name, str):
            found.add(name)
    return found


def build(playbook: Path, roles_path: Path) -> RoleMap:
    roles = {p.name: p for p in roles_path.iterdir() if (p / "tasks").is_dir()}
    texts = {
        name: "\n".join(f.read_text(errors="replace") for f in _yaml_files(p)) for name, p in roles.items()
    }
    reaches = {
        name: (_dependencies(path) | set(_INCLUDED.findall(texts[name]))) & set(roles)
        for name, path in roles.items()
    }
    defined = playbook_tags.defined(playbook, roles_path) or set()
    tagged = sorted(name for name in roles if name in defined)
    tags_of: dict[str, set[str]] = {name: set() for name in roles}
    cluster_wide = set()
    for tag in tagged:
        closure, todo = set(), [tag]
        while todo:
            name = todo.pop()
            if name not in closure:
                closure.add(name)
                todo += sorted(reaches[name])
        for name in closure:
            tags_of[name].add(tag)
        if _CLUSTER.search(texts[tag]):
            cluster_wide.add(tag)
    unrecorded = sorted(
        name for name, text in texts.items() if MANIFEST_MARK not in text and name not in NO_STATE
    )
    return RoleMap(tags_of, cluster_wide, unrecorded)
