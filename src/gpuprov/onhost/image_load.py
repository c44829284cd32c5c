"""The receiving end of `--push-image`: load one image archive into the host's engine, whole or not at all.

Standard library only; it runs with the host's system Python (ansible_python_interpreter, else python3),
which nothing has checked, so it parses on Python 3.6. The controller sends it as the text of `python -c`
on one SSH channel per host (gpuprov.launch.image_push):

    python -c <this file> IMAGE_ID TAG ENGINE_WORD...

IMAGE_ID is the image's config digest (sha256:<hex>), TAG the name the loaded image gets (none: ''),
the rest the engine's command: `docker`, `sudo -n podman`, `podman --root DIR`. The words before the first
one named docker or podman are a prefix (sudo), put in front of the clean-up too.

1. It asks the engine for IMAGE_ID (`ENGINE image inspect`) and answers one line on stdout: `have` (and
   exits 0) or `need`.
2. After `need` it waits for one JSON line on stdin, {"size": N, "sha256": HEX}, then N bytes: the archive
   (`docker save` format). They go straight into `ENGINE load`'s stdin as they arrive (no copy of its
   own on the host's disk), counted and hashed. Only when all N bytes came and their sha256 is right does
   the load's stdin see its end; on a short stream (the controller stopped: Ctrl-C, a lost connection),
   a wrong digest or end of input on stdin while the load still runs, the load is stopped (SIGTERM, then
   SIGKILL) with its stdin still open, so it never reads a complete-looking archive. Docker's load then
   fails on the broken upload; Podman copies stdin to a temporary file first, which lives in a private
   directory given to it as TMPDIR and removed here in every case.
3. The load done, it tags IMAGE_ID as TAG (an untagged image is "dangling": `docker image prune` would
   remove it), which fails unless the engine now has that image, and answers `loaded`.

A problem: one line on stderr (what failed, the engine's own last line), exit status 1. The controller
keeps its end of stdin open until the answer: closing the channel is how it stops a load.
"""

import contextlib
import hashlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import IO, List, Optional, Sequence, Tuple

BLOCK = 1 << 20
HEADER_WAIT_S = 30 * 60  # the controller saves the archive after every host has answered `need`
STOP_WAIT_S = 10.0  # a stopped load's grace before SIGKILL
TMP_BASE = "/var/tmp"  # Podman's own default for its temporary copy (podman-load(1), TMPDIR)
ENGINE_PROGRAMS = ("docker", "podman")
MISSING = ("no such image", "image not known")  # docker 20.10, podman 4.3 (tests/recorded/container-engines)


class Problem(Exception):
    """What went wrong, as the one line the controller shows."""


def say(word: str) -> None:
    sys.stdout.write(word + "\n")
    sys.stdout.flush()


def engine_run(engine: List[str], args: List[str], timeout: float = 120) -> Tuple[int, str, str]:
    """rc and the output of an engine command (stdout and stderr apart)."""
    proc = subprocess.Popen(
        [*engine, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def last_line(text: str, rc: int) -> str:
    """The line that says why: one naming a full disk, else the docker-archive attempt of Podman's
    one-line-per-format error ("payload does not match any of the supported image formats:"), else the
    last line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for wanted in ("no space left on device", "docker-archive:"):
        for line in lines:
            if wanted in line:
                return line
    return lines[-1] if lines else f"exit status {rc}"


def has_image(engine: List[str], image_id: str) -> bool:
    rc, out, err = engine_run(engine, ["image", "inspect", "--format", "{{.Id}}", image_id])
    if rc == 0:
        return out.strip().replace("sha256:", "") == image_id.replace("sha256:", "")
    if any(word in err.lower() for word in MISSING):
        return False
    raise Problem(f"{' '.join(engine)} image inspect failed: {last_line(err, rc)}")


def read_header(wait_s: float) -> Optional[Tuple[int, str]]:
    """The {"size", "sha256"} line, or None when stdin ended first (the controller had nothing to send)."""
    line = b""
    deadline = time.monotonic() + wait_s
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([0], [], [], left)[0]:
            raise Problem(f"no archive came within {wait_s:g} s")
        chunk = os.read(0, 1)  # byte by byte: what follows the line is the archive
        if not chunk:
            return None
        line += chunk
    header = json.loads(line.decode())
    return int(header["size"]), str(header["sha256"])


def feed(stdin: IO[bytes], size: int, sha256: str) -> Optional[str]:
    """Copy the archive from stdin into the load; why it is not whole, or None."""
    digest = hashlib.sha256()
    got = 0
    while got < size:
        block = os.read(0, min(BLOCK, size - got))
        if not block:
            return f"the stream ended after {got} of {size} bytes (the controller stopped, or SSH broke)"
        digest.update(block)
        got += len(block)
        try:
            stdin.write(block)
        except BrokenPipeError:
            return "load ended early"
    if digest.hexdigest() != sha256:
        return f"the archive arrived damaged (sha256 {digest.hexdigest()} instead of {sha256})"
    return None


def stop(load: "subprocess.Popen[bytes]") -> None:
    """End the load before its stdin ends (so it never sees a whole archive)."""
    if load.poll() is not None:
        return
    load.send_signal(signal.SIGTERM)
    try:
        load.wait(STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        load.kill()
        load.wait()


def wait_or_cancel(load: "subprocess.Popen[bytes]") -> Optional[int]:
    """The load's exit status; None when stdin ended first (the controller closed the channel)."""
    while True:
        try:
            return load.wait(0.5)
        except subprocess.TimeoutExpired:
            pass
        if select.select([0], [], [], 0)[0] and not os.read(0, 1):
            stop(load)
            return None


def split_engine(engine: List[str]) -> Tuple[List[str], List[str]]:
    """The prefix (sudo ...) and the engine's own words (docker/podman and its global options)."""
    for index, word in enumerate(engine):
        if os.path.basename(word) in ENGINE_PROGRAMS:
            return engine[:index], engine[index:]
    return [], engine


def load_image(engine: List[str], size: int, sha256: str, workdir: str) -> None:
    """Run the load with the archive from stdin; raise Problem unless it loaded."""
    log_path = os.path.join(workdir, "load.log")
    prefix, program = split_engine(engine)
    command = [*prefix, "env", "TMPDIR=" + workdir, *program, "load"]
    with open(log_path, "wb") as log:
        load = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT)
    try:
        assert load.stdin is not None
        why = feed(load.stdin, size, sha256)
        if why is not None and why != "load ended early":
            stop(load)
            raise Problem(why)
        with contextlib.suppress(BrokenPipeError):
            load.stdin.close()
        rc = wait_or_cancel(load)
    except BaseException:
        stop(load)
        raise
    if rc is None:
        raise Problem("stopped by the controller")
    if rc != 0:
        with open(log_path, "rb") as log:
            text = log.read().decode(errors="replace")
        raise Problem(f"{os.path.basename(program[0])} load failed: {last_line(text, rc)}")


def remove(prefix: List[str], workdir: str) -> None:
    """The private TMPDIR and all in it (files the engine wrote there as root: through the prefix)."""
    if prefix:
        subprocess.call([*prefix, "rm", "-rf", "--", workdir], stdin=subprocess.DEVNULL)
    shutil.rmtree(workdir, ignore_errors=True)


def receive(image_id: str, tag: str, engine: List[str]) -> None:
    if has_image(engine, image_id):
        say("have")
        return
    say("need")
    header = read_header(HEADER_WAIT_S)
    if header is None:
        return
    size, sha256 = header
    workdir = tempfile.mkdtemp(prefix="gpuprov-image-", dir=TMP_BASE)
    try:
        load_image(engine, size, sha256, workdir)
    finally:
        remove(split_engine(engine)[0], workdir)
    check_loaded(engine, image_id, tag)
    say("loaded")


def check_loaded(engine: List[str], image_id: str, tag: str) -> None:
    """The engine has image_id now (what loaded was that image); tagged, when tag is given. Tagging it by
    its ID is the check itself (one engine command less per host)."""
    if not tag:
        if not has_image(engine, image_id):
            raise Problem(f"the load finished but the engine has no image {image_id}")
        return
    rc, _, err = engine_run(engine, ["tag", image_id, tag])
    if rc == 0:
        return
    if any(word in err.lower() for word in MISSING):
        raise Problem(f"the load finished but the engine has no image {image_id}")
    raise Problem(f"{' '.join(engine)} tag {tag} failed: {last_line(err, rc)}")


def main(argv: Sequence[str]) -> int:
    if len(argv) < 4:
        sys.stderr.write("usage: image_load IMAGE_ID TAG ENGINE_WORD...\n")
        return 2
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a stopped helper cleans up as on Ctrl-C
    try:
        receive(argv[1], argv[2], list(argv[3:]))
    except Problem as exc:
        sys.stderr.write(str(exc) + "\n")
        return 1
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired) as exc:
        # no room for the private TMPDIR, no engine program, a bad header, an engine that hangs
        sys.stderr.write(f"{exc}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("stopped\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
