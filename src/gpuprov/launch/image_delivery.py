"""`--push-image`: before preflight, the image streamed from this machine to the selected hosts that lack it.

The streaming is gpuprov.launch.image_push's (`push_image(targets, image, *, engine_for) -> PushReport`: it
skips the hosts that have that digest, loads the others in parallel and leaves no half-loaded image). This
module calls it and turns a host it could not load into one line; preflight then checks, as without
--push-image, that every host has the image with one ID.
"""

from __future__ import annotations

import importlib
from typing import Any

from gpuprov import console, hosts
from gpuprov.errors import ExitCode, GpuprovError

ENGINE_VARIABLE = "container_runtime_engine"


def engine_for(host: hosts.Host) -> str | None:
    """The engine the inventory names for the host (the container_runtime role's choice), else None: the
    push finds docker or podman on the host as preflight does."""
    given = host.vars.get(ENGINE_VARIABLE)
    return str(given) if given else None


def push_missing(selected: list[hosts.Host], image: str) -> None:
    """Push image to the hosts that lack it; GpuprovError (exit 7) naming the hosts it could not load."""
    console.step(f"Pushing image {image} to the hosts that lack it")
    report = _image_push().push_image(selected, image, engine_for=engine_for)
    failed = failures(report)
    if failed:
        listed = "; ".join(f"{name}: {why}" for name, why in sorted(failed.items()))
        raise GpuprovError(
            f"--push-image could not load {image} on {len(failed)} host(s) ({listed}); nothing was started",
            ExitCode.PREFLIGHT_FAILED,
        )


def failures(report: Any) -> dict[str, str]:
    """Host -> reason for each host the report says failed (its outcomes: (host, state, reason))."""
    return {str(name): str(why) for name, state, why in report.outcomes if state == "failed"}


def _image_push() -> Any:
    return importlib.import_module("gpuprov.launch.image_push")
