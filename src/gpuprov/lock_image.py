"""The lock's optional image: `container_image`, pinned by digest, checked against the lock's driver.

An NGC PyTorch image (nvcr.io/nvidia/pytorch:YY.MM-py3@sha256:...) is looked up in the table's
`ngc_pytorch` rows: each release's CUDA, the driver it needs (at least the full-support minimum of that CUDA,
as for every other image), and the data-center driver branches NVIDIA states it also runs on (each row says
where). Any other image cannot be looked up: the lock states its CUDA in `container_image_cuda` ("cpu" for an
image without CUDA), and that CUDA's minimum driver comes from the table's `cuda` rows, as for the lock's own
CUDA.

`image_problems(image, driver_version, table)` checks an image reference (a `--image` on the command line)
against a driver version without a whole lock; `field_problems` and `driver_problems` check a lock's fields.

Like gpuprov.lock, this needs only the standard library: the filter plugin loads it through gpuprov.lock.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

IMAGE_FIELD = "container_image"
IMAGE_CUDA_FIELD = "container_image_cuda"
OPTIONAL_FIELDS = (IMAGE_FIELD, IMAGE_CUDA_FIELD)
NGC_KEY = "ngc_pytorch"
NGC_REPOSITORY = "nvcr.io/nvidia/pytorch"
HOW_TO_ADD = "to add a release, see 'Images in the lock' in docs/lock.md"

# The reference grammar of the distribution project (docker/distribution reference.go), narrowed to what a
# lock may hold: a registry host with an optional port, lower-case path components, an optional tag, and a
# sha256 digest, which is what makes every host run the same bytes.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST = (
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::\d+)?/)?"
)
_NAME = rf"{_HOST}{_COMPONENT}(?:/{_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_REFERENCE = re.compile(
    rf"(?P<name>{_NAME})(?::(?P<tag>{_TAG}))?(?:@(?P<digest>[A-Za-z0-9+._-]+:[A-Fa-f0-9]+))?"
)
_SHA256 = re.compile(r"sha256:[a-f0-9]{64}")
_NGC_TAG = re.compile(r"(?P<release>\d{2}\.\d{2})-py3")
_CUDA = re.compile(r"\d+\.\d+\.\d+|cpu")
_SHOWN = re.compile(r"[A-Za-z0-9][A-Za-z0-9.:/@+~_-]{0,199}")
_EXAMPLE = "nvcr.io/nvidia/pytorch:25.03-py3@sha256:<64 hex digits>"
# What a lock's lines call the image and its stated CUDA (image_problems' callers name their own).
_LOCK_NAMES = (IMAGE_FIELD, IMAGE_CUDA_FIELD)


def field_problems(gpu_stack: Mapping[str, Any]) -> list[str]:
    """The image fields' own shape: one line each; [] when absent or well formed."""
    problems = []
    image, cuda = gpu_stack.get(IMAGE_FIELD), gpu_stack.get(IMAGE_CUDA_FIELD)
    if image is not None:
        problems += _reference_problems(image, f"gpu_stack.{IMAGE_FIELD}")
    problems += _cuda_field_problems(cuda, f"gpu_stack.{IMAGE_CUDA_FIELD}")
    if cuda is not None and image is None:
        problems.append(f"gpu_stack.{IMAGE_CUDA_FIELD} is set without {IMAGE_FIELD}: set both, or neither")
    return problems


def driver_problems(gpu_stack: Mapping[str, Any], table: Mapping[str, Any]) -> list[str]:
    """[] when the locked driver runs the locked image, else one line saying what would fit.

    Call only with a lock whose fields are well formed (field_problems and gpuprov.lock's own are empty).
    """
    image = gpu_stack.get(IMAGE_FIELD)
    if image is None:
        return []
    stated = gpu_stack.get(IMAGE_CUDA_FIELD)
    return _image_driver_problems(str(image), str(gpu_stack["driver_version"]), stated, table, _LOCK_NAMES)


def image_problems(
    image: object,
    driver_version: str,
    table: Mapping[str, Any],
    *,
    image_cuda: object = None,
    names: tuple[str, str] = ("--image", "--image-cuda"),
) -> list[str]:
    """[] when `driver_version` runs `image`, else one line each: the reference's shape, then the driver.

    For a caller with an image outside the lock (launch's `--image`): the same rules as the lock's
    container_image. `names` are what the lines call the image and its stated CUDA.
    """
    problems = _reference_problems(image, names[0]) + _cuda_field_problems(image_cuda, names[1])
    if problems:
        return problems
    return _image_driver_problems(str(image), driver_version, image_cuda, table, names)


def _image_driver_problems(
    image: str, driver: str, stated: Any, table: Mapping[str, Any], names: tuple[str, str]
) -> list[str]:
    release = image_release(image)
    if release is None:
        return _own_image_problems(stated, driver, table, names)
    row = _ngc_row(table, release)
    if row is None:
        listed = [str(r["release"]) for r in _ngc_rows(table)]
        return [
            f"{names[0]} is NGC PyTorch {release}, which gpuprov's table does not list "
            f"(listed: {_list(listed)}); {HOW_TO_ADD}"
        ]
    if stated is not None and stated != str(row["cuda"]):
        return [
            f"{names[1]} {stated} contradicts NGC PyTorch {release}, which is built on CUDA "
            f"{row['cuda']}: drop {names[1]} (NGC images are looked up) or fix it"
        ]
    if runs_on(row, driver):
        return []
    return [_ngc_refusal(row, driver, table)]


def runs_on(row: Mapping[str, Any], driver: str) -> bool:
    """Whether an NGC release runs on this driver: its own minimum, or a forward-compatible branch."""
    if _key(driver) >= _key(str(row["min_driver"])):
        return True
    branch = driver.split(".")[0]
    forward = {str(k): str(v) for k, v in (row.get("forward_compatible") or {}).items()}
    return branch in forward and _key(driver) >= _key(forward[branch])


def image_release(image: str) -> str | None:
    """The NGC PyTorch release of an image reference ("25.01"); None for any other image or a malformed
    reference."""
    match = _REFERENCE.fullmatch(image)
    return ngc_release(match.group("name"), match.group("tag")) if match else None


def ngc_release(name: str, tag: str | None) -> str | None:
    """ "nvcr.io/nvidia/pytorch", "25.01-py3" -> "25.01"; None for any other image."""
    if name != NGC_REPOSITORY or tag is None:
        return None
    found = _NGC_TAG.fullmatch(tag)
    return found.group("release") if found else None


def _reference_problems(image: Any, name: str) -> list[str]:
    if not isinstance(image, str) or "{{" in image or "{%" in image:
        what = (
            "a template (not shown)" if isinstance(image, str) else f"a {type(image).__name__}, not a string"
        )
        return [f"{name} is {what}: it must be an image reference pinned by digest, e.g. {_EXAMPLE}"]
    match = _REFERENCE.fullmatch(image)
    if match is None:
        return [f"{name} is not an image reference ({_shown(image)}); write it as e.g. {_EXAMPLE}"]
    digest = match.group("digest")
    if digest is None:
        return [
            f"{name} {_shown(image)} has a tag but no digest: "
            "gpuprov pins images by digest so every host runs the same bytes; append @sha256:<digest> "
            f"(`skopeo inspect docker://{_shown(image)}` prints it)"
        ]
    if not _SHA256.fullmatch(digest):
        return [f"{name}'s digest is not sha256:<64 lower-case hex digits>: e.g. {_EXAMPLE}"]
    return []


def _cuda_field_problems(cuda: Any, name: str) -> list[str]:
    if cuda is None or (isinstance(cuda, str) and _CUDA.fullmatch(cuda)):
        return []
    return [
        f"{name} is {_shown(cuda)}: it must be the CUDA version inside the image, "
        'such as "12.4.1", or "cpu" for an image without CUDA'
    ]


def _own_image_problems(
    stated: Any, driver: str, table: Mapping[str, Any], names: tuple[str, str]
) -> list[str]:
    image_name, cuda_name = names
    if stated is None:
        return [
            f"{image_name} is not an NGC PyTorch image, so gpuprov cannot look up its CUDA: set "
            f'{cuda_name} to the CUDA version inside it (e.g. "12.4.1"), or "cpu"'
        ]
    if stated == "cpu":
        return []
    row = next((r for r in _rows(table, "cuda") if str(r["version"]) == stated), None)
    if row is None:
        listed = [str(r["version"]) for r in _rows(table, "cuda")]
        return [
            f"{cuda_name} {stated} is not in gpuprov's compatibility table (listed: {_list(listed)}); "
            "to add a release, see 'Adding a release to the table' in docs/lock.md"
        ]
    minimum = str(row["min_driver"])
    if _key(driver) >= _key(minimum):
        return []
    return [
        f"driver_version {driver} cannot run {image_name}: its CUDA {stated} needs driver >= {minimum}; "
        f"lock a newer driver or an image built on an older CUDA"
    ]


def _ngc_refusal(row: Mapping[str, Any], driver: str, table: Mapping[str, Any]) -> str:
    forward = row.get("forward_compatible") or {}
    also = ", ".join(f"{v} (or later R{k})" for k, v in forward.items())
    minimum = str(row["min_driver"])
    fitting = [str(r["release"]) for r in _ngc_rows(table) if runs_on(r, driver)]
    return (
        f"driver_version {driver} cannot run NGC PyTorch {row['release']} (CUDA {row['cuda']}): it needs "
        f"driver {minimum} or later (branch R{minimum.split('.')[0]} or newer)"
        + (f", or on data-center GPUs {also}, as NVIDIA states for this release" if also else "")
        + f"; NGC PyTorch releases that run on {driver}: {_list(fitting)}"
    )


def _ngc_rows(table: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return _rows(table, NGC_KEY)


def _ngc_row(table: Mapping[str, Any], release: str) -> Mapping[str, Any] | None:
    return next((r for r in _ngc_rows(table) if str(r["release"]) == release), None)


def _rows(table: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    return [r for r in table.get(kind, []) if isinstance(r, Mapping)]


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def _list(items: Iterable[str]) -> str:
    values = list(items)
    return ", ".join(values) if values else "none in the table"


def _shown(value: Any) -> str:
    """Quoted back only when it looks like a reference or a version: anything else may be a pasted secret."""
    text = str(value)
    if isinstance(value, (str, int, float)) and _SHOWN.fullmatch(text):
        return repr(value) if not isinstance(value, str) else text
    return "not shown: it does not look like one"
