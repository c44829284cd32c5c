"""`container-image` (`gpuprov launch --image IMAGE`): each host's ranks run inside IMAGE, one container per
host named after the job, started by the host's engine (docker or podman, what the container_runtime role
installs).

Preflight asks each host, in its one command (host_check_command): which engine, whether it runs (`info`,
as the user or through `sudo -n`), the toolkit's part (Docker's nvidia runtime, or a CDI spec for
nvidia.com/gpu) on hosts with GPUs, InfiniBand devices, the image's ID; then it starts a check container
with the job's own flags (container_run.run_flags), which reports memlock, /dev/shm and the IB devices as
the job will see them and runs probe.py inside, with the image's python: torch, CUDA, NCCL and the port test
come from inside the image, on the same channel. The image must have the same ID on every host.
"""

from __future__ import annotations

import json
import secrets
import shlex
from collections import defaultdict
from dataclasses import dataclass, field

from gpuprov import hosts, onhost, ssh
from gpuprov.errors import BadInput
from gpuprov.launch.environments import container_run
from gpuprov.launch.environments.container_run import ENGINES, Engine
from gpuprov.launch.environments.host_python import finish_import, inventory_gpus, read_check
from gpuprov.launch.preflight import (
    NOT_READY,
    SECTION,
    SMI_COMMAND,
    HostCheck,
    Problem,
    Sections,
    gpu_count,
    probe_code,
)

HOST_PYTHON = "python3"  # runs agent.py and receive.py on the host (stdlib only); ranks use the image's
DEFAULT_IMAGE_PYTHON = "python3"
ENGINE_VARIABLE = "container_runtime_engine"  # the container_runtime role's choice, per host or group
IMAGE_PYTHON_VARIABLE = "gpuprov_image_python"
ROLE_HINT = "apply the container_runtime role (`gpuprov bootstrap -e container_runtime_enabled=true`)"
MIN_SHM_KIB = 1024 * 1024  # 1 GiB: below it NCCL's shared-memory transport fails (nccl#290, #342)
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
IMPORT_MARKS = ".gpuprov/image-imports"  # under the user's home on each host: a directory per image ID
MARK_MOUNT = "/run/gpuprov-import-mark"  # where the check container sees it
MARK_DIR_VARIABLE = "GPUPROV_IMPORT_MARK_DIR"  # onhost/probe.py reads it
# How long the check may be silent: creating the check container copies the image where the engine stores
# it with vfs, which a site may choose (a 1.19 GB image took over two minutes on a loaded machine); with
# overlay2/overlay it takes about a second, and a check that answers sooner ends the wait sooner.
CHECK_SILENCE_S = 300.0


@dataclass
class HostFacts:
    """What one host's check found beyond HostCheck's fields."""

    engine: Engine | None = None
    image_id: str | None = None  # the engine's image ID (sha256 of its config), None: not on the host
    ib_devices: list[str] = field(default_factory=list)


@dataclass
class ContainerImage:
    image: str = ""
    name: str = "container-image"
    default_python: str = DEFAULT_IMAGE_PYTHON
    facts: dict[str, HostFacts] = field(default_factory=dict)
    # --push-image: the image ID the push put on the hosts. A load drops the registry's digest (RepoDigests),
    # so a NAME@sha256:... reference does not resolve where it was loaded: the hosts are asked by this ID.
    pushed_id: str | None = None

    @property
    def asked(self) -> str:
        """What each host's engine is asked for: the pushed image's ID, else the user's reference."""
        return self.pushed_id or self.image

    def check_host(self, check: HostCheck) -> None:
        check.python = HOST_PYTHON
        self.facts[check.host.name] = facts = HostFacts()
        _probe(check, self.asked, facts)

    def python_choice(self, host: hosts.Host) -> str:
        return f"py={HOST_PYTHON}"

    def finish_check(self, check: HostCheck) -> None:
        finish_import(check, f"{self.image_of(check.host)} in {self.image}")

    def disagreements(self, checks: list[HostCheck]) -> list[Problem]:
        return image_disagreements(
            self.image, {c.host.name: self.facts[c.host.name].image_id for c in checks}
        )

    def describe(self, check: HostCheck) -> str:
        facts = self.facts[check.host.name]
        engine = facts.engine.label if facts.engine else "no engine"
        return f"{engine}, image {short_id(facts.image_id)}, torch {check.torch}, CUDA {check.cuda}"

    def ib_hosts(self) -> dict[str, list[str]]:
        """The hosts that have InfiniBand devices, and which (for the NCCL transport warning)."""
        return {name: facts.ib_devices for name, facts in self.facts.items() if facts.ib_devices}

    def image_of(self, host: hosts.Host) -> str:
        """The interpreter the ranks run with inside the image."""
        return str(host.vars.get(IMAGE_PYTHON_VARIABLE) or DEFAULT_IMAGE_PYTHON)

    def rank_python(self, check: HostCheck) -> str:
        return self.image_of(check.host)

    def host_script(self, script: str, job_id: str, job_dir: str, check: HostCheck) -> str:
        """run.sh: the launcher's script, run inside the image in the job's one container on this host; by
        the image ID preflight found (the same on every host): what was checked is what runs, and a loaded
        image has no registry digest to run it by."""
        facts = self.facts[check.host.name]
        assert facts.engine is not None and facts.image_id is not None
        return container_run.wrap(
            script,
            engine=facts.engine,
            image=facts.image_id,
            name=container_run.container_name(job_id),
            job_dir=job_dir,
            gpus=check.gpus > 0,
            ib=bool(facts.ib_devices),
        )


def short_id(image_id: str | None) -> str:
    return image_id.removeprefix("sha256:")[:12] if image_id else "missing"


def image_disagreements(image: str, ids: dict[str, str | None]) -> list[Problem]:
    """The image is on every host, with one ID (exit 7, naming the hosts)."""
    missing = sorted(name for name, found in ids.items() if found is None)
    problems = []
    if missing:
        problems.append(
            Problem(
                NOT_READY,
                f"image {image} is not on {', '.join(missing)}; pull it there, or give --push-image to "
                "stream it from this machine",
            )
        )
    by_id: dict[str, list[str]] = defaultdict(list)
    for name, found in ids.items():
        if found is not None:
            by_id[found.removeprefix("sha256:")].append(name)
    if len(by_id) > 1:
        parts = [f"{', '.join(sorted(names))} {digest[:12]}" for digest, names in sorted(by_id.items())]
        problems.append(
            Problem(
                NOT_READY,
                f"image {image} differs between hosts (image ID: {'; '.join(parts)}); give the image by "
                "digest (NAME@sha256:...) and pull it again on the hosts that differ",
            )
        )
    return problems


def host_check_command(image: str, wanted: str | None, count_gpus: bool, image_python: str) -> str:
    """One shell command for every check of one host (a host costs one round trip).

    Sections (`@@gpuprov NAME` ... `@@gpuprov end RC`): engine (its name, or none), info (`ENGINE info` as
    JSON, as the user or through sudo -n: the line `@@gpuprov via sudo|user`), cdi (spec files naming
    nvidia.com/gpu), smi (GPUs, unless the inventory counts them), ib (/dev/infiniband), image (`image
    inspect`: ID), then, when the image is there: inside (memlock, shm, IB devices and libibverbs as the
    check container sees them, run with the job's flags), python and check (probe.py check inside).
    """
    q = shlex.quote
    lines = [
        container_run.engine_find(wanted),
        f'echo "{SECTION}engine $engine"',
        '[ -n "$engine" ] || exit 0',
        f"echo '{SECTION}info'; {container_run.engine_via()}",
        f'printf \'%s\\n\' "$out"; echo "{SECTION}end $r"; echo "{SECTION}via $via"',
        "[ $r -eq 0 ] || exit 0",
        f"echo '{SECTION}cdi'; grep -l 'nvidia.com/gpu' "
        + " ".join(f"{d}/*.yaml {d}/*.json" for d in CDI_DIRS)
        + f' 2>/dev/null; echo "{SECTION}end $?"',
    ]
    if count_gpus:
        lines.append(
            f"echo '{SECTION}smi'; out=$( ( {SMI_COMMAND} ) 2>&1 ); r=$?; "
            '[ -z "$out" ] || printf \'%s\\n\' "$out"; '
            f'echo "{SECTION}end $r"; [ $r -ne 0 ] || gpus=$(printf \'%s\\n\' "$out" | grep -c .)'
        )
    lines += [
        f"echo '{SECTION}ib'; ls /dev/infiniband 2>/dev/null; echo \"{SECTION}end $?\"",
        # the check container runs the ID found here: what preflight checked is what it compares
        f"echo '{SECTION}image'; id=$($run image inspect --format '{{{{.Id}}}}' {q(image)} 2>&1); r=$?; "
        f'printf \'%s\\n\' "$id"; echo "{SECTION}end $r"',
        "[ $r -eq 0 ] || exit 0",
        _inside_command(image_python),
    ]
    return "\n".join(lines) + "\n"


def _inside_command(image_python: str) -> str:
    """The check container: the job's flags (chosen here by engine, GPUs and IB), then probe.py inside."""
    q = shlex.quote
    inside = "; ".join(
        [
            f"echo '{SECTION}inside'",
            'echo "memlock $(ulimit -l)"',
            "echo \"shm $(df -k /dev/shm | awk 'NR==2 {print $2}')\"",
            "echo \"ib $(ls /dev/infiniband 2>/dev/null | tr '\\n' ' ')\"",
            "echo \"verbs $(ldconfig -p 2>/dev/null | grep -c 'libibverbs.so')\"",
            f"echo '{SECTION}python {image_python}'",
            f"echo '{SECTION}check'",
            "exec " + onhost.python_command(image_python, probe_code(), "check"),
        ]
    )
    return "\n".join(
        [
            # GPUs: the inventory's count or nvidia-smi's rows (smi); IB: /dev/infiniband has devices
            '[ "${gpus:-0}" -gt 0 ] 2>/dev/null && g=1 || g=0',
            'ib=0; [ -n "$(ls /dev/infiniband 2>/dev/null)" ] && ib=1',
            *container_run.flags_case("engine", "g", "ib"),
            f"name=gpuprov-check-{secrets.token_hex(4)}",
            # The image's last good `import torch`, kept on the host per image ID (probe.py's mark): the
            # check container's own files go with it, and without the mark every launch imports torch.
            f'marks="$HOME/{IMPORT_MARKS}/${{id#sha256:}}"; mkdir -p "$marks" 2>/dev/null || marks=',
            'case "$marks" in *[[:space:]]*) marks= ;; esac  # $keep is split into words below',
            f'keep=""; [ -z "$marks" ] || keep="-v $marks:{MARK_MOUNT} -e {MARK_DIR_VARIABLE}={MARK_MOUNT}"',
            # as the user, as the job's container runs (templates/container.sh.j2): an image whose Python
            # only root can read fails here, and the record is the user's file
            f'$run run --rm -i --name "$name" --user "$(id -u):$(id -g)" $flags $keep "$id" '
            f'sh -c {q(inside)} 2>&1; r=$?; echo "{SECTION}end $r"',
        ]
    )


def _probe(check: HostCheck, image: str, facts: HostFacts) -> None:
    host = check.host
    given = inventory_gpus(check)
    wanted = host.vars.get(ENGINE_VARIABLE)
    if wanted is not None and wanted not in ENGINES:
        raise BadInput(f"{ENGINE_VARIABLE}={wanted} is not one of {', '.join(ENGINES)}; fix the inventory")
    command = host_check_command(
        image, wanted, given is None, str(host.vars.get(IMAGE_PYTHON_VARIABLE) or DEFAULT_IMAGE_PYTHON)
    )
    if given is not None:
        command = f"gpus={given}\n" + command
    read_check(
        check,
        command,
        lambda answers: read_checks(check, answers, given is None, image, facts),
        CHECK_SILENCE_S,
    )


def read_checks(check: HostCheck, answers: Sections, count_gpus: bool, image: str, facts: HostFacts) -> bool:
    """Read the host check's sections into check and facts; True when probe.py runs on the channel."""
    name = check.host.name
    section, _ = answers.section()
    engine_name = section.removeprefix("engine").strip()
    if not engine_name:
        check.problems.append(
            Problem(NOT_READY, f"{name}: no container engine (docker or podman); {ROLE_HINT}")
        )
        return False
    answers.section()
    info_lines, info_rc = answers.until_end()
    via, _ = answers.section()
    facts.engine = Engine(engine_name, sudo=via == "via sudo")
    if info_rc != 0:
        last = container_run.info_error(info_lines)
        check.problems.append(
            Problem(
                NOT_READY, f"{name}: `{engine_name} info` failed ({last}); start the engine, or {ROLE_HINT}"
            )
        )
        return False
    answers.section()
    cdi_lines, _ = answers.until_end()
    if count_gpus:
        answers.section()
        smi_lines, smi_rc = answers.until_end()
        check.gpus = gpu_count(
            ssh.Result(smi_rc if smi_rc is not None else 255, "\n".join(smi_lines) + "\n", "")
        )
    answers.section()
    facts.ib_devices, _ = answers.until_end()
    problem = container_run.toolkit_problem(facts.engine, "\n".join(info_lines), cdi_lines, check.gpus)
    if problem:
        check.problems.append(Problem(NOT_READY, f"{name}: {problem}; {ROLE_HINT}"))
        return False
    answers.section()
    image_lines, image_rc = answers.until_end()
    if image_rc != 0:
        check.torch = ""  # answered: the image's absence is named with the other hosts' in disagreements
        return False
    facts.image_id = image_lines[-1].strip()
    return _read_inside(check, answers, image, facts)


def _read_inside(check: HostCheck, answers: Sections, image: str, facts: HostFacts) -> bool:
    name = check.host.name
    said: list[str] = []  # the engine's own words when the container did not start
    while (line := answers.next_line()) is not None and line != f"{SECTION}inside":
        said.append(line)
    if line is None:
        # the engine's error, not docker's closing "Run 'docker run --help' for more information"
        words = [w.strip() for w in said if w.strip() and not w.startswith("Run '")]
        last = (words or ["no answer"])[-1]
        check.problems.append(
            Problem(NOT_READY, f"{name}: the check container of {image} did not start: {last}")
        )
        return False
    seen: dict[str, str] = {}
    while (line := answers.next_line()) is not None and not line.startswith(SECTION):
        key, _, value = line.partition(" ")
        seen[key] = value.strip()
        if key == "verbs":
            break
    for problem in container_run.inside_problems(seen, facts.ib_devices, check.gpus):
        check.problems.append(Problem(NOT_READY, f"{name}: {problem}"))
    answers.section()  # python
    answers.section()  # check: probe.py's first line
    first = answers.next_line()
    try:
        info = json.loads(first or "")
    except ValueError:
        last = (first or "no answer").strip()
        check.problems.append(
            Problem(
                NOT_READY,
                f"{name}: {check.python} in {image} gave no answer ({last}); set "
                f"{IMAGE_PYTHON_VARIABLE} to the image's python with torch",
            )
        )
        return False
    if "error" in info:
        check.problems.append(
            Problem(NOT_READY, f"{name}: the image {image} has no usable torch ({info['error']})")
        )
        return False
    check.torch, check.cuda, check.nccl = info["torch"], info.get("cuda"), info.get("nccl")
    check.answers = answers
    check.importing = not info.get("imported_before")
    return not check.problems
