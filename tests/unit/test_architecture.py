"""The house rules of src/gpuprov, checked on the source (docs/developers/architecture.md draws them).

- One SSH layer: no module but gpuprov/ssh.py imports paramiko.
- Verbs stay in their rooms: a verb's package is imported from another package only through its public
  modules (PUBLIC below); the Ansible engine (`gpuprov.ansible`) knows no verb.
- Host-side programs live in gpuprov/onhost and import nothing of gpuprov but each other (they run on hosts
  without gpuprov; gpuprov.onhost ships them together).
- Small functions: none over 80 lines.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "gpuprov"
MAX_FUNCTION_LINES = 80

# The packages that are verbs, and the one module of each that other packages may import.
VERBS = {"bootstrap", "launch", "check", "bench", "sandbox", "lock_commands", "upgrade"}
PUBLIC = {
    "gpuprov.launch.api",  # how check and bench run a job on hosts
    "gpuprov.check.store",  # check's stored results, which bench reports beside its own
    "gpuprov.check.api",  # check as a gate on some hosts with a given lock (upgrade)
}


def _modules() -> Iterator[tuple[str, Path, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        yield name, path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _imports(tree: ast.Module) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from gpuprov.launch import api` imports gpuprov.launch.api: judge the names, not the package
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"


MODULES = list(_modules())


def test_the_rules_see_the_whole_package() -> None:
    names = {name for name, _, _ in MODULES}
    assert {"gpuprov.ssh", "gpuprov.cli", "gpuprov.launch.api"} <= names


def test_only_ssh_imports_paramiko() -> None:
    offenders = [
        f"{path.relative_to(SRC.parent)}:{line}"
        for name, path, tree in MODULES
        if name != "gpuprov.ssh"
        for line, imported in _imports(tree)
        if imported == "paramiko" or imported.startswith("paramiko.")
    ]
    assert offenders == []


def _verb(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "gpuprov" and len(parts) > 1 and parts[1] in VERBS else None


def test_verbs_reach_each_other_only_through_public_modules() -> None:
    offenders = []
    for name, path, tree in MODULES:
        home = _verb(name)
        if name == "gpuprov.cli":
            continue  # the command group registers every verb's command
        for line, imported in _imports(tree):
            other = _verb(imported)
            if other is None or other == home:
                continue
            if not any(imported == public or imported.startswith(public + ".") for public in PUBLIC):
                offenders.append(f"{path.relative_to(SRC.parent)}:{line} imports {imported}")
    assert offenders == []


def _imports_of(package: str, wrong: Callable[[str], bool]) -> list[str]:
    """Where a module of `package` imports what `wrong` says it must not."""
    return [
        f"{path.relative_to(SRC.parent)}:{line} imports {imported}"
        for name, path, tree in MODULES
        if name.startswith(package)
        for line, imported in _imports(tree)
        if wrong(imported)
    ]


def test_the_ansible_engine_knows_no_verb() -> None:
    assert _imports_of("gpuprov.ansible", lambda imported: _verb(imported) is not None) == []


def test_host_side_programs_import_nothing_of_gpuprov() -> None:
    # another host-side program is shipped beside it or spliced into it (gpuprov.onhost.program)
    assert (
        _imports_of(
            "gpuprov.onhost",
            lambda imported: (
                imported.split(".")[0] == "gpuprov" and not imported.startswith("gpuprov.onhost.")
            ),
        )
        == []
    )


@pytest.mark.parametrize("name,path,tree", MODULES, ids=[name for name, _, _ in MODULES])
def test_no_function_is_over_80_lines(name: str, path: Path, tree: ast.Module) -> None:
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines, line {node.lineno})"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == []
