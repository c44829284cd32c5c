"""gpuprov.onhost: every host program keeps the package's rule, and the two probes of `gpuprov check` that
were strings in hostprobe.py run here as the hosts run them (`python -c <text>`), torch's part stood in for
or skipped where there is no torch."""

from __future__ import annotations

import ast
import io
import json
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

from gpuprov import onhost
from gpuprov.onhost import matmul_probe

FILES = sorted(p.name for p in onhost.HERE.glob("*.py"))
# The programs that run with the job's env may import torch (probe.py: its `import torch` check).
TORCH = {
    "env_probe.py", "matmul_probe.py", "probe.py", "run_torchrun.py", "bench_node.py", "bench_models.py",
    "allreduce.py",
}  # fmt: skip
# The programs that may meet a host's Python before gpuprov knows it is good (gpuprov/onhost/__init__.py):
# Python 3.6 must parse them, and evaluate their definitions, so that they can say what is wrong.
OLDEST_PYTHON = {
    "hostprobe.py", "env_probe.py", "matmul_probe.py", "probe.py", "sockets.py", "mpirun_rank.py",
    "mpirun_standby.py", "image_load.py", "fetch_url.py", "managed_state.py",
}  # fmt: skip
# The __future__ features Python 3.6 knows; `annotations` (3.7) is a SyntaxError there.
FUTURES_OF_3_6 = {
    "nested_scopes", "generators", "division", "absolute_import", "with_statement", "print_function",
    "unicode_literals", "barry_as_FLUFL", "generator_stop",
}  # fmt: skip
# Builtins that only Python 3.9 subscripts at run time (PEP 585): `tuple[int, int]` is a TypeError on 3.8.
BUILTIN_GENERICS = {"dict", "list", "tuple", "set", "frozenset", "type"}
# What a program may import besides the standard library (and torch where it runs in the env): the sockets
# module, spliced in when the program is sent, and bench_models beside bench_node.
ALLOWED = {
    "probe.py": {"gpuprov.onhost.sockets"},
    "hostprobe.py": {"gpuprov.onhost.sockets"},
    "bench_node.py": {"models", "gpuprov.onhost.bench_models"},
}


def _imports(tree: ast.Module, name: str) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # `from . import bench_models`
                found |= {f"gpuprov.onhost.{alias.name}" for alias in node.names}
            elif node.module is not None:
                found.add(node.module)
    return found


def test_the_package_holds_every_host_program() -> None:
    assert set(FILES) == {
        "__init__.py", "agent.py", "allreduce.py", "bench_models.py", "bench_node.py", "env_probe.py",
        "fetch_url.py", "hostprobe.py", "image_load.py", "managed_state.py", "matmul_probe.py",
        "mpirun_rank.py", "mpirun_standby.py", "probe.py", "receive.py", "run_torchrun.py", "sockets.py",
    }  # fmt: skip


@pytest.mark.parametrize("name", FILES)
def test_each_program_is_python_3_8_and_imports_the_standard_library_only(name: str) -> None:
    tree = ast.parse(onhost.text(name), filename=name, feature_version=(3, 8))
    top = set(sys.stdlib_module_names) | ({"torch"} if name in TORCH else set())
    spliced = ALLOWED.get(name, set())
    outside = sorted(m for m in _imports(tree, name) if m not in spliced and m.split(".")[0] not in top)
    assert outside == [], f"{name} imports {outside}: host programs use the standard library only"


def _defers_annotations(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.ImportFrom) and node.module == "__future__" and "annotations" in
        {alias.name for alias in node.names}
        for node in tree.body
    )  # fmt: skip


def _unevaluated_annotations(tree: ast.Module) -> set[int]:
    """The ids of the annotations Python never evaluates: a local variable's, and every one under
    `from __future__ import annotations`. The others (a signature's, a module's or class's variable) run."""
    deferred = _defers_annotations(tree)
    found: set[int] = set()

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) and deferred:
                args = child.args
                every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
                found.update(id(a.annotation) for a in every if a is not None and a.annotation is not None)
                if child.returns is not None:
                    found.add(id(child.returns))
            if isinstance(child, ast.AnnAssign) and (deferred or in_function):
                found.add(id(child.annotation))
            inside = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            visit(child, inside or (in_function and not isinstance(child, ast.ClassDef)))

    visit(tree, False)
    return found


def runtime_generics(source: str) -> list[str]:
    """What the module evaluates that Python 3.8 cannot: `list[int]` (PEP 585, 3.9) or `int | None`
    (PEP 604, 3.10) in a base class, a default, a module-level expression or an evaluated annotation."""
    tree = ast.parse(source)
    unevaluated = _unevaluated_annotations(tree)
    skip = {id(sub) for node in ast.walk(tree) if id(node) in unevaluated for sub in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        generic = isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and (
            node.value.id in BUILTIN_GENERICS
        )  # fmt: skip
        union = isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr) and "None" in ast.unparse(node)
        if generic or union:
            found.append(f"line {getattr(node, 'lineno', 0)}: {ast.unparse(node)}")
    return found


def too_new_for_3_6(source: str) -> list[str]:
    """What Python 3.6's parser rejects, beyond what ast's feature_version=(3, 6) reports on 3.11: the
    3.7+ __future__ features (PEP 563's `annotations`), walrus, positional-only parameters, f"{x=}"."""
    problems = []
    try:
        ast.parse(source, feature_version=(3, 6))
    except SyntaxError as exc:
        problems.append(f"line {exc.lineno}: {exc.msg}")
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            problems += [
                f"from __future__ import {a.name}" for a in node.names if a.name not in FUTURES_OF_3_6
            ]
        elif isinstance(node, ast.NamedExpr):
            problems.append(f"line {node.lineno}: := (3.8)")
        elif isinstance(node, ast.arguments) and node.posonlyargs:
            problems.append(f"positional-only parameters {[a.arg for a in node.posonlyargs]} (3.8)")
    for line, text in _fstrings(source):
        if SELF_DOCUMENTING.search(text):
            problems.append(f"line {line}: f-string '=' (3.8)")
    return problems


def _fstrings(source: str) -> list[tuple[int, str]]:
    """Each f-string's line and text. Python 3.12+ tokenizes an f-string in parts (PEP 701: FSTRING_START
    ... FSTRING_END), older ones as one STRING token; the newest-Ansible lane runs these tests on 3.13."""
    lines = source.splitlines(keepends=True)

    def text(start: tuple[int, int], end: tuple[int, int]) -> str:
        if start[0] == end[0]:
            return lines[start[0] - 1][start[1] : end[1]]
        middle = "".join(lines[start[0] : end[0] - 1])
        return lines[start[0] - 1][start[1] :] + middle + lines[end[0] - 1][: end[1]]

    found, depth, begin = [], 0, (0, 0)
    start_type, end_type = getattr(tokenize, "FSTRING_START", None), getattr(tokenize, "FSTRING_END", None)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        prefix = token.string[: len(token.string) - len(token.string.lstrip("rRbBuUfF"))]
        if token.type == tokenize.STRING and "f" in prefix.lower():
            found.append((token.start[0], token.string))
        elif token.type == start_type:
            depth, begin = depth + 1, token.start if depth == 0 else begin
        elif token.type == end_type:
            depth -= 1
            if depth == 0:
                found.append((begin[0], text(begin, token.end)))
    return found


# {expression=} with an optional !conversion and :format in an f-string (not ==, !=, <=, >=).
SELF_DOCUMENTING = re.compile(r"\{[^{}]*?[^=!<>]=\s*(![rsa])?(:[^{}]*)?\}")


@pytest.mark.parametrize("name", sorted(OLDEST_PYTHON))
def test_the_programs_that_meet_an_unknown_python_parse_on_3_6(name: str) -> None:
    assert too_new_for_3_6(onhost.text(name)) == [], name
    assert runtime_generics(onhost.text(name)) == [], name  # their definitions are evaluated on 3.6 too
    if name in {"probe.py", "hostprobe.py"}:  # and as sent, with sockets.py spliced in
        assert too_new_for_3_6(onhost.program(name)) == [], name


def test_the_3_6_check_sees_what_3_6_rejects() -> None:
    for source in (
        "from __future__ import annotations\n",
        "if (n := 1):\n    pass\n",
        "def f(a, /):\n    pass\n",
        "x = 1\nprint(f'{x=}')\n",
        "print(f'{x = !r:>10}')\n",
    ):
        assert too_new_for_3_6(source), source
    assert too_new_for_3_6("from __future__ import division\nprint(f'{a == b} {c != d} {e:>=4}')\n") == []


@pytest.mark.parametrize("name", FILES)
def test_no_program_evaluates_what_python_3_8_cannot(name: str) -> None:
    assert runtime_generics(onhost.text(name)) == [], name


def test_the_runtime_check_sees_builtin_generics_where_they_run() -> None:
    assert runtime_generics("class A(Base[tuple[int, int]]):\n    pass\n") == ["line 1: tuple[int, int]"]
    assert runtime_generics("X = dict[str, int]\n") == ["line 1: dict[str, int]"]
    assert sorted(runtime_generics("def f(x: list[int] = None) -> int | None:\n    pass\n")) == [
        "line 1: int | None",
        "line 1: list[int]",
    ]
    assert runtime_generics("class A:\n    x: list[int] = []\n") == ["line 2: list[int]"]
    never_run = "def f() -> None:\n    y: list[int] = []\n"
    deferred = "from __future__ import annotations\ndef f(x: list[int]) -> int | None:\n    pass\n"
    assert runtime_generics(never_run) == [] and runtime_generics(deferred) == []


def test_hostprobe_on_a_python_too_old_says_what_to_set() -> None:
    """EL8's /usr/bin/python3 is 3.6: the probe (which 3.6 parses) says so in one line, exit 3."""
    code = onhost.program("hostprobe.py")
    old = (
        "import sys\nsys.version_info = (3, 6, 8, 'final', 0)\nsys.argv = ['-c', 'collect']\n"
        f"exec(compile({code!r}, '<hostprobe>', 'exec'), {{'__name__': '__main__'}})\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", old], capture_output=True, text=True, timeout=60, input="{}"
    )
    assert result.returncode == 3 and result.stdout == "", result
    assert result.stderr.splitlines() == [
        f"{sys.executable} is Python 3.6.8, older than 3.8 (gpuprov's host programs and Ansible's modules "
        "need 3.8+): set ansible_python_interpreter to a newer one, e.g. on Rocky/RHEL 8 `dnf install "
        "python3.12` and ansible_python_interpreter=/usr/bin/python3.12"
    ]


def test_program_puts_the_sockets_code_in_place_of_its_import() -> None:
    text = onhost.program("probe.py")
    assert onhost.SOCKETS_IMPORT not in text and "def send_token(" in text
    ast.parse(text, feature_version=(3, 8))
    with pytest.raises(ValueError, match="must import the host socket helpers"):
        onhost.program("agent.py")
    with pytest.raises(FileNotFoundError):
        onhost.path("nothing.py")


def _run(name: str, *args: str, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [sys.executable, "-c", onhost.text(name), *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_env_probe_without_torch_says_why(tmp_path: Path) -> None:
    (tmp_path / "torch.py").write_text(
        "raise ImportError('libcudart.so.12: cannot open shared object file')\n"
    )
    info = json.loads(_run("env_probe.py", pythonpath=tmp_path).stdout)
    assert info == {
        "python": ".".join(map(str, sys.version_info[:3])),
        "error": "ImportError: libcudart.so.12: cannot open shared object file",
    }


FAKE_TORCH = """
__version__ = "2.13.0+cu128"
class version:
    cuda = "12.8"
class cuda:
    @staticmethod
    def is_available():
        return True
    @staticmethod
    def device_count():
        return 8
    class nccl:
        @staticmethod
        def version():
            return (2, 27, 3)
"""


def test_env_probe_reports_torchs_versions(tmp_path: Path) -> None:
    (tmp_path / "torch.py").write_text(FAKE_TORCH)
    info = json.loads(_run("env_probe.py", pythonpath=tmp_path).stdout)
    assert info == {
        "python": ".".join(map(str, sys.version_info[:3])),
        "torch": "2.13.0+cu128",
        "torch_cuda": "12.8",
        "cuda_available": True,
        "device_count": 8,
        "torch_nccl": "2.27.3",
    }


def test_matmul_probe_arithmetic() -> None:
    assert matmul_probe.arguments(["16384", "4.0"]) == (16384, 4.0, 0.0)  # no SOAK given: none
    assert matmul_probe.products(4.0, 0.01) == 400  # capped: below CUDA's launch queue depth
    assert matmul_probe.products(4.0, 2.0) == 3
    assert matmul_probe.products(4.0, 0.1) == 40
    assert matmul_probe.tflops(16384, 400, 1000.0) == round(2.0 * 16384**3 * 400 / 1e12, 2)
    assert json.loads(matmul_probe.result_line(16384, {"0": 1.5})) == {
        "n": 16384,
        "dtype": "float16",
        "tflops": {"0": 1.5},
    }


def test_matmul_probe_reads_its_arguments_before_torch(tmp_path: Path) -> None:
    bad = _run("matmul_probe.py", "big", "4", pythonpath=tmp_path)
    assert bad.returncode == 1 and "ValueError: invalid literal for int()" in bad.stderr
    no_torch = _run("matmul_probe.py", "64", "0.1", pythonpath=tmp_path)
    if "No module named 'torch'" not in no_torch.stderr:
        pytest.skip("this python has torch: the GPU part runs only where torch sees a GPU")
    assert no_torch.returncode == 1 and no_torch.stdout == ""


def test_matmul_probe_on_a_gpu() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no GPU that torch sees")
    proc = subprocess.run(
        [sys.executable, "-c", onhost.text("matmul_probe.py"), "1024", "0.2"],
        input="read\n", capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and lines[0] == "busy", proc.stderr
    result = json.loads(lines[-1])
    assert result["n"] == 1024 and len(result["tflops"]) == torch.cuda.device_count()
