"""Every hint names an option its verb really has: the options in gpuprov's messages (BadInput and the
other errors, check results' `action`) are looked up in the --help of each verb the message can reach.

A verb's own package reaches that verb; a shared module's function reaches the verbs whose package uses it
(by name, directly or through the module's own functions). An option of another program the hint tells
the user to run (`ssh-keygen -R`, `nvidia-smi -r`) is that program's; `gpuprov VERB --opt` is VERB's.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from gpuprov import cli
from tests.unit import in_process
from tests.unit.bad_input.commands import one_error

SRC = Path(cli.__file__).parent
VERBS = {"bootstrap": "bootstrap", "check": "check", "bench": "bench", "launch": "launch"}  # package: verb
SHARED = ["host_options.py", "hosts.py", "cli_options.py", "ssh.py", "ansible/arguments.py"]
MESSAGES = {"BadInput", "GpuprovError", "EnvironmentProblem", "Problem", "Unreachable", "HostKeyProblem"}
OPTION = re.compile(r"(?<![\w/.=-])(--[a-z][a-z0-9-]*|-[a-zA-Z])(?![\w-])")
# The command the option follows in the same command line (words with no punctuation between).
_ARGS = r"(?: [^\s;:,()`]+)* $"
_PROGRAMS = "ssh-keygen|ssh-keyscan|ansible-inventory|nvidia-smi|systemctl|modprobe"
OTHER_PROGRAM = re.compile(rf"({_PROGRAMS}){_ARGS}")
ANOTHER_VERB = re.compile(rf"gpuprov ((?:sandbox )?[a-z]+){_ARGS}")


def _hint_strings(node: ast.AST) -> Iterator[str]:
    """The texts of the messages and actions in `node`."""
    for call in ast.walk(node):
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        parts: list[ast.AST] = [call] if name in MESSAGES else []
        parts += [kw.value for kw in call.keywords if kw.arg == "action"]
        for part in parts:
            yield from _texts(part)


def _texts(node: ast.AST) -> Iterator[str]:
    """The strings in node; an f-string as one text, each value in it shown as VALUE."""
    if isinstance(node, ast.JoinedStr):
        yield "".join(v.value if isinstance(v, ast.Constant) else "VALUE" for v in node.values)
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    else:
        for child in ast.iter_child_nodes(node):
            yield from _texts(child)


def _options(text: str) -> Iterator[tuple[str, str | None]]:
    """(option, the gpuprov command it belongs to where the text names one; None: another program's)."""
    for match in OPTION.finditer(text):
        before = text[: match.start()]
        if OTHER_PROGRAM.search(before):
            continue
        verb = ANOTHER_VERB.search(before)
        yield match.group(1), verb.group(1) if verb else ""


@cache
def _help(command: str) -> str:
    result = in_process.gpuprov(*command.split(), "--help", env={"COLUMNS": "250"})
    assert result.returncode == 0, result.stderr
    return result.stdout


def _functions(path: Path) -> dict[str, ast.AST]:
    tree = ast.parse(path.read_text())
    return {
        n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
    }


def _closure(functions: dict[str, ast.AST], names: set[str]) -> set[str]:
    """The names and every function of the module they use."""
    todo, seen = list(names), set()
    while todo:
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        todo += [n.id for n in ast.walk(functions[name]) if isinstance(n, ast.Name)]
    return seen


def _used_by(package: str, module: str) -> set[str]:
    """The names of `module` (e.g. host_options) that the package's files use."""
    short = module.rsplit("/", 1)[-1].removesuffix(".py")
    used: set[str] = set()
    for path in (SRC / package).rglob("*.py"):
        tree = ast.parse(path.read_text())
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == short:
                used.add(n.attr)
            if isinstance(n, ast.ImportFrom) and (n.module or "").endswith(short):
                used.update(alias.name for alias in n.names)
    return used


def _hints() -> Iterator[tuple[str, str, str]]:
    """(verb, option, where) for every option a message can show to a verb's user."""
    for package, verb in VERBS.items():
        for path in (SRC / package).rglob("*.py"):
            for text in _hint_strings(ast.parse(path.read_text())):
                for option, other in _options(text):
                    yield other or verb, option, f"{path.relative_to(SRC)}: {text!r}"
        for module in SHARED:
            functions = _functions(SRC / module)
            for name in _closure(functions, _used_by(package, module)):
                for text in _hint_strings(functions[name]):
                    for option, other in _options(text):
                        yield other or verb, option, f"{module} {name}(): {text!r}"


def test_the_scan_finds_the_hints_it_is_meant_to() -> None:
    found = {(verb, option) for verb, option, _ in _hints()}
    # bench's "pass -i INVENTORY" (host_options) is bench's too; bootstrap's --forks hint is not check's.
    assert {("bench", "-i"), ("check", "-i"), ("launch", "--env-file"), ("check", "-e")} <= found
    assert ("sandbox up", "--slurm") in found  # `gpuprov sandbox up --slurm` in a launch hint
    assert not {option for verb, option in found if verb == "check"} & {"--forks", "--strategy", "-t", "-R"}


def test_every_hint_names_an_option_the_verb_has() -> None:
    wrong = sorted(
        {
            f"gpuprov {command} has no {option}: {where}"
            for command, option, where in _hints()
            if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", _help(command))
        }
    )
    assert wrong == []


@pytest.mark.parametrize("verb", ["bench", "check", "launch train.py", "bootstrap"])
def test_no_inventory_hint_names_an_option_of_the_verb(tmp_path: Path, verb: str) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    result = in_process.gpuprov(*verb.split(), cwd=tmp_path)
    error = one_error(result, 2)
    assert "no inventory found" in error, error
    for option, _ in _options(error):
        assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", _help(verb.split()[0])), (option, error)
