"""gpuprov.onhost: every host program keeps the package's rule, and the two probes of `gpuprov check` that
were strings in hostprobe.py run here as the hosts run them (`python -c <text>`), torch's part stood in for
or skipped where there is no torch."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuprov import onhost
from gpuprov.onhost import matmul_probe

FILES = sorted(p.name for p in onhost.HERE.glob("*.py"))
# The programs that run with the job's env may import torch (probe.py: its `import torch` check).
TORCH = {"env_probe.py", "matmul_probe.py", "probe.py", "run_torchrun.py", "bench_node.py", "bench_models.py"}
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
        "__init__.py", "agent.py", "bench_models.py", "bench_node.py", "env_probe.py", "hostprobe.py",
        "matmul_probe.py", "probe.py", "receive.py", "run_torchrun.py", "sockets.py",
    }  # fmt: skip


@pytest.mark.parametrize("name", FILES)
def test_each_program_is_python_3_8_and_imports_the_standard_library_only(name: str) -> None:
    tree = ast.parse(onhost.text(name), filename=name, feature_version=(3, 8))
    top = set(sys.stdlib_module_names) | ({"torch"} if name in TORCH else set())
    spliced = ALLOWED.get(name, set())
    outside = sorted(m for m in _imports(tree, name) if m not in spliced and m.split(".")[0] not in top)
    assert outside == [], f"{name} imports {outside}: host programs use the standard library only"


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
    assert matmul_probe.arguments(["16384", "4.0"]) == (16384, 4.0)
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
