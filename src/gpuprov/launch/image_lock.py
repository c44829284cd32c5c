"""`--image` against the lock, before any host is touched: the lock's own image rules (gpuprov.lock_image).

The lock is the selected hosts' `gpu_stack` (the inventory's). What is checked:
- the lock names a `container_image` (pinned by digest): `--image` must be pinned by digest too (a tag can
  move between hosts' pulls), and an image other than the lock's is allowed with a warning;
- `--image` is the lock's image: the lock's driver must run it (its CUDA from the NGC rows, or the lock's
  `container_image_cuda`), as bootstrap checks;
- any other NGC PyTorch image pinned by digest: the lock's driver must run it (its CUDA is in the table).
An image outside the lock that is not NGC PyTorch has no CUDA gpuprov can look up: preflight still runs
torch inside it on every host. A host list without a lock is not checked here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpuprov import console, hosts, lock, lock_image
from gpuprov.errors import BadInput


def the_lock(selected: Sequence[hosts.Host]) -> Mapping[str, Any] | None:
    """The first selected host's gpu_stack that names a driver (the inventory gives one lock to a group)."""
    for host in selected:
        stack = host.vars.get(hosts.LOCK_VARIABLE)
        if isinstance(stack, Mapping) and isinstance(stack.get("driver_version"), str):
            return stack
    return None


def problems(image: str, stack: Mapping[str, Any], table: Mapping[str, Any]) -> list[str]:
    """What is wrong with running image under the lock stack (each one line); warns when it is not the
    lock's container_image."""
    driver = str(stack["driver_version"])
    locked = stack.get(lock_image.IMAGE_FIELD)
    if locked is None:
        if not _pinned_ngc(image):
            return []
        return lock_image.image_problems(image, driver, table)
    if image == locked:
        return lock_image.image_problems(
            image, driver, table, image_cuda=stack.get(lock_image.IMAGE_CUDA_FIELD)
        )
    refused = lock_image.image_problems(image, driver, table)
    if refused and (not _pinned(image) or _pinned_ngc(image)):
        return [f"{refused[0]} (the lock's container_image is {locked})"]
    console.warning(
        f"--image {image} is not the lock's container_image ({locked}); the job runs the image given"
    )
    return []


def check(image: str, selected: Sequence[hosts.Host]) -> None:
    """BadInput (exit 2) with the first problem, before any host is touched."""
    stack = the_lock(selected)
    if stack is None:
        return
    found = problems(image, stack, lock.load_table())
    if found:
        raise BadInput(found[0])


def _pinned(image: str) -> bool:
    """Given with a digest (lock_image checks its exact shape when it matters)."""
    return "@sha256:" in image


def _pinned_ngc(image: str) -> bool:
    return _pinned(image) and lock_image.image_release(image) is not None
