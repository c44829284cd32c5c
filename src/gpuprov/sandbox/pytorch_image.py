"""The sandbox's PyTorch image: CPython 3.11 and the CPU build of torch 2.13.0 on the Debian 12 rootfs.

Made from the sandbox mirror's own wheels (gpuprov.sandbox.mirror.WHEELS), installed into a virtual
environment at /opt/venv with pip and no index, so it holds the very torch the nodes' python_env installs.
Built once per machine (gpuprov.sandbox.service_images), then pushed to the sandbox registry.
"""

from __future__ import annotations

from pathlib import Path

from gpuprov.errors import GpuprovError
from gpuprov.sandbox import mirror, service_images

REPOSITORY = "gpuprov/pytorch-cpu"
TORCH = "torch==2.13.0+cpu"
VENV = "/opt/venv"


def spec(content: mirror.MirrorContent) -> service_images.ServiceImage:
    """The image's recipe from the mirror's wheel directory."""
    wheels = sorted((content.root / "pypi" / "wheels").glob("*.whl"))
    if not any(w.name.startswith("torch-2.13.0+cpu-cp311") for w in wheels):
        raise GpuprovError(f"the sandbox mirror {content.root} has no torch 2.13.0 CPU wheel for Python 3.11")
    return service_images.ServiceImage(
        name="pytorch-cpu",
        inputs=tuple(Path(w).resolve() for w in wheels),
        commands=(
            ("python3", "-m", "venv", VENV),
            (
                f"{VENV}/bin/pip",
                "install",
                "--no-index",
                "--no-cache-dir",
                "--find-links",
                service_images.INPUTS_DIR,
                TORCH,
                "numpy",
            ),
        ),
        changes=(
            f"ENV PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            'CMD ["python3"]',
        ),
    )


def tag(local_ref: str) -> str:
    """The tag it is pushed under: the torch it holds and the build's content hash (gpuprov/...:<hash>), so
    a rebuilt image never hides behind an older push of the same tag."""
    return f"{TORCH.split('==')[1].replace('+', '-')}-{local_ref.rsplit(':', 1)[1]}"
