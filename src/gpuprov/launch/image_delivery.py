"""`--push-image`: before preflight, the image streamed from this machine to the selected hosts that lack it.

The streaming is gpuprov.launch.image_push's (`push_image(targets, image, *, engine_for) -> PushReport`: it
skips the hosts that have the image ID, loads the others in parallel and leaves no half-loaded image). This
module first asks each host how gpuprov runs its engine (container_run.engine_via: the one place preflight
decides it too, `sudo -n podman` for Podman), so the image goes into the store the job runs from (root's,
not the SSH user's rootless one); then pushes over the same sessions and turns a host it could not load into
one line. The load drops the registry's digest (RepoDigests), so the run goes on by the image ID the push
returns: preflight checks that ID on every host and run.sh runs it.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuprov import console, hosts, ssh
from gpuprov.errors import ExitCode, GpuprovError
from gpuprov.launch import image_push
from gpuprov.launch.environments import container_run
from gpuprov.launch.environments.container_image import ENGINE_VARIABLE

ENGINE_QUESTION_TIMEOUT_S = 60.0


def engine_question(wanted: str | None) -> str:
    """Shell answering `ENGINE user|sudo RC` (RC: `ENGINE info`'s), or `none`: preflight's own choice."""
    return (
        f"{container_run.engine_find(wanted)}\n"
        '[ -n "$engine" ] || { echo none; exit 0; }\n'
        f"{container_run.engine_via()}\n"
        'echo "$engine $via $r"\n'
    )


def host_engine(host: hosts.Host, client: ssh.Client) -> list[str]:
    """The engine's argv on host as preflight will run it; GpuprovError (exit 7) when it has none usable."""
    wanted = host.vars.get(ENGINE_VARIABLE)
    result = ssh.run(
        client, engine_question(str(wanted) if wanted else None), timeout=ENGINE_QUESTION_TIMEOUT_S
    )
    words = result.stdout.split()
    if len(words) != 3 or words[0] not in container_run.ENGINES or words[2] != "0":
        said = " ".join(words) or result.stderr.strip() or f"rc {result.rc}"
        raise GpuprovError(
            f"--push-image: {host.name} has no usable container engine ({said}); apply the container_runtime "
            "role there, then rerun",
            ExitCode.PREFLIGHT_FAILED,
        )
    return container_run.Engine(words[0], sudo=words[1] == "sudo").argv


def push_missing(selected: list[hosts.Host], image: str) -> image_push.PushReport:
    """Push image to the hosts that lack it; the report (its image_id is what the job runs).

    GpuprovError naming the hosts it could not load (exit 7, 6 if SSH failed); PushInterrupted (130)."""
    console.step(f"Pushing image {image} to the hosts that lack it")
    clients: dict[str, ssh.Client] = {}
    try:
        engines = _engines(selected, clients)
        targets = [image_push.HostTarget(host, clients[host.name]) for host in selected]
        report = image_push.push_image(targets, image, engine_for=lambda host: engines[host.name])
    finally:
        for client in clients.values():
            client.close()
    error = report.error()
    if error is not None:
        raise error
    for state in (image_push.HAD, image_push.LOADED):
        if report.names(state):
            console.detail(f"{state}: {', '.join(report.names(state))}")
    console.detail(f"the job runs image ID {report.image_id} ({report.tag} on the hosts that loaded it)")
    return report


def _engines(selected: Sequence[hosts.Host], clients: dict[str, ssh.Client]) -> dict[str, list[str]]:
    """Each host's engine argv (one SSH round trip each, all at once); the sessions go into clients. The
    first host's problem (in inventory order) is raised: nothing has been pushed yet."""

    def ask(host: hosts.Host) -> list[str]:
        clients[host.name] = client = ssh.connect(host)
        return host_engine(host, client)

    outcomes = ssh.fan_out(list(selected), ask)
    return dict(zip((host.name for host in selected), ssh.values(outcomes), strict=True))
