"""`host-python`: ranks run in the host's own Python env, the one the python_env role installs.

Which interpreter: the inventory's gpuprov_python, else the one the role's fact file names, else the
default. Preflight's answers for it, in the one command that is each host's preflight round trip
(host_check_command): the fact file, nvidia-smi's GPUs (unless the inventory counts them), then probe.py
check with that python (torch, CUDA, NCCL at once from files; a first `import torch` finishes later).
"""

from __future__ import annotations

import json
import shlex
from collections import Counter
from collections.abc import Callable

from gpuprov import hosts, onhost, ssh
from gpuprov.errors import BadInput, GpuprovError
from gpuprov.launch.preflight import (
    NOT_READY,
    SECTION,
    SMI_COMMAND,
    HostCheck,
    Problem,
    Sections,
    gpu_count,
    probe_code,
    probe_command,
)

FACT_FILE = "/etc/ansible/facts.d/gpuprov_python_env.fact"
DEFAULT_PYTHON = "/opt/gpuprov/envs/train/bin/python"
IMPORT_TIMEOUT_S = 120.0

_FACT_PYTHON_SED = r's/^[[:space:]]*"python":[[:space:]]*"\([^"\\]*\)".*$/\1/p'


class HostPython:
    name = "host-python"
    default_python = DEFAULT_PYTHON

    def check_host(self, check: HostCheck) -> None:
        check.python = DEFAULT_PYTHON  # until the host says which
        _probe(check)

    def python_choice(self, host: hosts.Host) -> str:
        given = host.vars.get("gpuprov_python")
        return python_choice(str(given) if given else None)

    def finish_check(self, check: HostCheck) -> None:
        finish_import(check)

    def disagreements(self, checks: list[HostCheck]) -> list[Problem]:
        return _versions_agree(checks)

    def describe(self, check: HostCheck) -> str:
        return f"python {check.python}, torch {check.torch}, CUDA {check.cuda}, NCCL {check.nccl}"

    def rank_python(self, check: HostCheck) -> str:
        return check.python

    def host_script(self, script: str, job_id: str, job_dir: str, check: HostCheck) -> str:
        return script  # the launcher's script runs on the host as it is


def host_check_command(given_python: str | None, count_gpus: bool) -> str:
    """One shell command for every check of one host, so that a host costs one round trip.

    Sections, each `@@gpuprov NAME` ... `@@gpuprov end RC`: fact (the python_env role's fact file), smi
    (nvidia-smi's GPU list, when the inventory does not give gpuprov_gpu_count), then python (the env's
    python it used: gpuprov_python, else the one the fact file names, else the default) and check
    (probe.py check with that python: look's line at once, import's later when it is needed).
    """
    q = shlex.quote
    lines = [
        f"echo '{SECTION}fact'; cat {q(FACT_FILE)} 2>&1; r=$?; echo; echo \"{SECTION}end $r\"",
    ]
    if count_gpus:
        lines.append(f"echo '{SECTION}smi'; ( {SMI_COMMAND} ) 2>&1; r=$?; echo \"{SECTION}end $r\"")
    lines.append(python_choice(given_python))
    lines.append(f'echo "{SECTION}python $py"')
    look = onhost.python_command("PYTHON", probe_code(), "check").replace("PYTHON", '"$py"', 1)
    lines.append(f"echo '{SECTION}check'; {look} 2>&1; r=$?; echo \"{SECTION}end $r\"")
    return "\n".join(lines) + "\n"


def python_choice(given_python: str | None) -> str:
    """The shell line that sets $py: gpuprov_python, else the python the fact file names, else the default."""
    q = shlex.quote
    if given_python:
        return f"py={q(given_python)}"
    return (
        f"py=$(sed -n {q(_FACT_PYTHON_SED)} {q(FACT_FILE)} 2>/dev/null | head -n 1); "
        f'[ -n "$py" ] || py={q(DEFAULT_PYTHON)}'
    )


def inventory_gpus(check: HostCheck) -> int | None:
    """The host's GPUs as the inventory counts them (gpuprov_gpu_count, into check), else None: ask it."""
    try:
        given = hosts.gpu_count(check.host.vars)
    except ValueError as exc:
        raise BadInput(f"{exc}; fix the inventory") from None
    if given is not None:
        check.gpus = given
    return given


def read_check(check: HostCheck, command: str, read: Callable[[Sections], bool], timeout: float) -> None:
    """Run the host's one check command and read it with read(); its channel stays open when read() says
    the job can run there (probe.py's, for the port test), else it is closed. SSH failing: GpuprovError.
    The launcher's questions go first in the same command; Sections keeps their answers aside. Once the
    channel is open, check.opened starts (the push beside the checks)."""
    assert check.client is not None
    channel = ssh.open_channel(check.client, check.launcher_command + command, read_timeout=timeout)
    try:
        if check.opened is not None:
            check.opened(check)  # the push beside the checks: its session opens after this one
        if not read(Sections(channel, check.launcher_answers)):
            channel.close()
    except ssh.SessionLost as exc:
        channel.close()
        cause = exc.cause
        raise GpuprovError(
            f"SSH failed during the checks ({type(cause).__name__}: {ssh.reason(cause)})"
        ) from None
    except BaseException:
        channel.close()
        raise


def _probe(check: HostCheck) -> None:
    given = inventory_gpus(check)
    given_python = check.host.vars.get("gpuprov_python")
    command = host_check_command(str(given_python) if given_python else None, count_gpus=given is None)
    read_check(check, command, lambda answers: _read_checks(check, answers, given is None), 60)


def _no_env(check: HostCheck, text: str, fact_rc: int | None) -> Problem:
    """Why the env's python gave no answer (text: what it printed instead)."""
    name = check.host.name
    if "No such file" in text or "not found" in text:
        where = FACT_FILE if fact_rc == 0 else f"no {FACT_FILE}"
        return Problem(
            NOT_READY,
            f"{name}: no Python env at {check.python} ({where}); run `gpuprov bootstrap` on it "
            "first (or set gpuprov_python for the host)",
        )
    last = (text.strip().splitlines() or ["no answer"])[-1].strip()
    return Problem(NOT_READY, f"{name}: {check.python} failed: {last}")


def _look_again(check: HostCheck) -> Sections:
    """probe.py check on a channel of its own, with check.python."""
    assert check.client is not None
    command = probe_command(check.python, "check") + " 2>&1"
    try:
        return Sections(ssh.open_channel(check.client, command, read_timeout=60))
    except ssh.SessionLost as exc:  # not the reading's "SSH failed during the checks": its own message
        raise GpuprovError(exc.message) from None


def _read_checks(check: HostCheck, answers: Sections, count_gpus: bool) -> bool:
    """Read the host check's sections into check; True when its import is still running on the channel."""
    host = check.host
    name, _ = answers.section()
    fact_lines, fact_rc = answers.until_end()
    fact_python = fact_nccl = None
    if fact_rc == 0:
        try:
            recorded = json.loads("\n".join(fact_lines))
            fact_python, fact_nccl = recorded.get("python"), recorded.get("nccl_version")
        except (ValueError, AttributeError):
            check.problems.append(
                Problem(NOT_READY, f"{host.name}: {FACT_FILE} is not valid JSON; re-run `gpuprov bootstrap`")
            )
            return False
    smi: ssh.Result | None = None
    if count_gpus:
        answers.section()
        smi_lines, smi_rc = answers.until_end()
        smi = ssh.Result(smi_rc if smi_rc is not None else 255, "\n".join(smi_lines) + "\n", "")
    name, _ = answers.section()
    used = name.removeprefix("python ")
    check.python = str(host.vars.get("gpuprov_python") or fact_python or DEFAULT_PYTHON)
    answers.section()
    first = answers.next_line()
    if used != check.python:  # the shell read the fact file differently: look again with the right one
        answers.channel.close()
        answers = _look_again(check)
        first = answers.next_line()
    output = [first] if first is not None else []
    info = None
    while first is not None:
        try:
            info = json.loads(first)
            break
        except ValueError:
            first = answers.next_line()
            if first is not None:
                output.append(first)
    if info is None:
        check.problems.append(_no_env(check, "\n".join(output), fact_rc))
        return False
    if "error" in info:
        check.problems.append(
            Problem(NOT_READY, f"{host.name}: the env {check.python} has no usable torch ({info['error']})")
        )
        return False
    check.torch, check.cuda = info["torch"], info.get("cuda")
    check.nccl = info.get("nccl") or fact_nccl
    if smi is not None:
        check.gpus = gpu_count(smi)
    check.answers = answers
    check.importing = not info.get("imported_before")
    return True


def finish_import(check: HostCheck, where: str | None = None) -> None:
    """End the host's check: wait for its `import torch`, whose versions replace those read from files.

    where: the interpreter as the messages name it (default check.python; an image's: `python3 in IMAGE`)."""
    where = where or check.python
    answers = check.answers
    if answers is None:
        return
    check.answers = None
    name = check.host.name
    try:
        answers.channel.shutdown_write()  # end of input: probe.py ends once its import has
        if not check.importing:
            return
        answers.channel.settimeout(IMPORT_TIMEOUT_S)
        if answers.import_line is None:
            answers.ask("", ())  # to the end of its output: the import's line is kept on the way
        info = json.loads((answers.import_line or "").removeprefix("import "))
    except (ssh.SessionLost, ValueError):
        check.problems.append(
            Problem(
                NOT_READY,
                f"{name}: `import torch` with {where} did not report ({answers.last_other()})",
            )
        )
        check.torch = None
        return
    finally:
        answers.channel.close()
    if "error" in info:
        check.problems.append(
            Problem(NOT_READY, f"{name}: the env {where} cannot import torch ({info['error']})")
        )
        check.torch = None
        return
    check.torch, check.cuda = info["torch"], info.get("cuda")
    check.nccl = info.get("nccl") or check.nccl


def _versions_agree(checks: list[HostCheck]) -> list[Problem]:
    problems = []
    for label, attr in (("torch", "torch"), ("CUDA (torch.version.cuda)", "cuda"), ("NCCL", "nccl")):
        values = Counter(str(getattr(c, attr)) for c in checks)
        if len(values) <= 1:
            continue
        common, _ = values.most_common(1)[0]
        odd = [f"{c.host.name} has {getattr(c, attr)}" for c in checks if str(getattr(c, attr)) != common]
        problems.append(
            Problem(
                NOT_READY,
                f"{label} versions differ: {', '.join(odd)}, the other hosts {common}; "
                "re-run `gpuprov bootstrap` so every host has the same env",
            )
        )
    return problems
