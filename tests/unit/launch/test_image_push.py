"""--push-image's controller side (image_push, image_archive) against fake host helpers, and the host
helper's decisions (onhost/image_load.py) against real engines' recorded outputs (tests/recorded/).

The helper with a real engine, and the push over real SSH, are tests/integration/launch/test_image_push.py.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tarfile
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from gpuprov import interrupts, ssh
from gpuprov.errors import BadInput, EnvironmentProblem, ExitCode
from gpuprov.hosts import Host
from gpuprov.launch import image_archive, image_push
from gpuprov.onhost import image_load

RECORDED = Path(__file__).parents[2] / "recorded" / "container-engines"
HEX = "dc2e9b9faa200da651b891bf3128c20961b79f4bcd35bc7e0fe474a30a8cf3ed"
IMAGE_ID = f"sha256:{HEX}"


def make_archive(path: Path, manifest: object, payload: bytes = b"layer bytes") -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in (("layer/layer.tar", payload), ("manifest.json", json.dumps(manifest).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def host(name: str) -> Host:
    return Host(name, f"10.0.0.{name[-1]}", 22, "gpuprov", None, Path("/nonexistent/known_hosts"))


# ----- where the image comes from ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [f"{HEX}.json", f"blobs/sha256/{HEX}"],  # docker 20.10 / podman save; Docker 25+ (OCI layout)
)
def test_the_image_id_is_the_config_digest_in_the_archives_manifest(tmp_path: Path, config: str) -> None:
    archive = make_archive(tmp_path / "a.tar", [{"Config": config, "RepoTags": [], "Layers": []}])
    assert image_archive.archive_image_id(archive) == IMAGE_ID


def test_the_manifest_of_a_real_docker_save_archive_is_read() -> None:
    # manifest.json as `docker save` (Docker 20.10.24) wrote it for the sandbox node image
    manifest = json.loads((RECORDED / "docker-20.10-save-manifest.json").read_text())
    assert manifest[0]["Config"] == f"{HEX}.json"


@pytest.mark.parametrize(
    ("manifest", "words"),
    [
        ([{"Config": "a.json"}, {"Config": "b.json"}], "exactly one image"),
        ([{"Config": "config.json"}], "no config digest"),
        ({"Config": f"{HEX}.json"}, "exactly one image"),
    ],
)
def test_an_archive_that_is_not_one_image_is_refused(tmp_path: Path, manifest: object, words: str) -> None:
    archive = make_archive(tmp_path / "a.tar", manifest)
    with pytest.raises(BadInput, match=words):
        image_archive.archive_image_id(archive)


def test_a_compressed_or_foreign_archive_is_refused_with_what_to_do(tmp_path: Path) -> None:
    gz = tmp_path / "a.tar.gz"
    with tarfile.open(gz, "w:gz") as tar:
        tar.addfile(tarfile.TarInfo("manifest.json"), io.BytesIO(b""))
    with pytest.raises(BadInput, match=r"not an uncompressed docker-archive .*docker save"):
        image_archive.archive_image_id(gz)
    with pytest.raises(BadInput, match="is not a file"):
        image_archive.source("x:1", tmp_path / "missing.tar")


def completed(stdout: str, stderr: str, rc: int) -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess([], rc, stdout, stderr)


def test_an_image_the_controller_lacks_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (RECORDED / "docker-20.10-inspect-missing.txt").read_text()
    monkeypatch.setattr(image_archive, "_engine", lambda *a: completed("[]\n", text, 1))
    with pytest.raises(BadInput) as caught:
        image_archive.resolve("docker", "repo/img@sha256:" + "1" * 64)
    assert caught.value.exit_code == ExitCode.BAD_INPUT
    assert "is not in this machine's docker" in caught.value.message
    assert "nothing was sent" in caught.value.message


def test_an_engine_that_does_not_answer_is_this_machines_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (RECORDED / "docker-20.10-inspect-no-daemon.txt").read_text()
    monkeypatch.setattr(image_archive, "_engine", lambda *a: completed("", text, 1))
    with pytest.raises(EnvironmentProblem, match="Cannot connect to the Docker daemon"):
        image_archive.resolve("docker", "repo/img:1")


def test_no_engine_and_no_archive_on_the_controller(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(EnvironmentProblem, match="neither docker nor podman"):
        image_archive.source("repo/img:1")


def test_a_full_disk_while_saving_says_where_and_leaves_no_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(
        image_archive, "_engine", lambda *a: completed("", "Error: write /tmp/x: no space left on device", 1)
    )
    src = image_archive.Source("repo/img:1", IMAGE_ID, "docker")
    with pytest.raises(EnvironmentProblem, match=r"no room to save repo/img:1 .*TMPDIR"), src.archive():
        pass
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("reference", "tag"),
    [
        ("registry:5000/team/pytorch@sha256:" + "a" * 64, "registry:5000/team/pytorch:gpuprov-dc2e9b9faa20"),
        ("nvcr.io/nvidia/pytorch:25.01-py3", "nvcr.io/nvidia/pytorch:gpuprov-dc2e9b9faa20"),
        ("local/img", "local/img:gpuprov-dc2e9b9faa20"),
    ],
)
def test_a_loaded_image_is_tagged_after_its_repository_and_id(reference: str, tag: str) -> None:
    assert image_push.tag_for(reference, IMAGE_ID) == tag


# ----- the push, against fake host helpers ---------------------------------------------------------------


class FakeHelper:
    """image_load.py on one host as the controller sees it: its answer, then what it does with the bytes."""

    def __init__(self, answer: str, verdict: tuple[int, bytes, bytes] = (0, b"loaded\n", b"")) -> None:
        self.answer, self.verdict = answer, verdict
        self.received = bytearray()
        self.input_ended = threading.Event()
        self.closed = False
        self.on_send: Any = None

    def settimeout(self, seconds: float | None) -> None:
        pass

    def readline(self) -> bytes:
        return self.answer.encode() + b"\n"

    def send(self, data: bytes) -> None:
        if self.on_send is not None:
            self.on_send(self)
        self.received += data

    def exit_status(self, timeout: float | None = None) -> int:
        if interrupts.requested() and not self.input_ended.is_set():
            raise ssh.SessionLost("timeout", TimeoutError())
        return self.verdict[0]

    def read(self) -> bytes:
        return self.verdict[1]

    def read_stderr(self) -> bytes:
        return self.verdict[2]

    def shutdown_write(self) -> None:
        self.input_ended.set()

    def close(self) -> None:
        self.closed = True

    @property
    def archive(self) -> bytes:
        return bytes(self.received).split(b"\n", 1)[1] if self.received else b""


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """Hosts node1..node4 reached through fake helpers; the controller's engine saves a small archive."""
    state: dict[str, Any] = {"helpers": {}, "saves": 0, "commands": {}}
    archive = make_archive(tmp_path / "src.tar", [{"Config": f"{HEX}.json"}], payload=b"x" * 3_000_000)

    def open_channel(client: Any, command: str, **kwargs: Any) -> FakeHelper:
        name = client
        state["commands"][name] = command
        helper: FakeHelper = state["helpers"][name]
        return helper

    def save(engine: str, reference: str, path: Path) -> None:
        state["saves"] += 1
        path.write_bytes(archive.read_bytes())

    monkeypatch.setattr(ssh, "open_channel", open_channel)
    monkeypatch.setattr(image_archive, "resolve", lambda engine, ref: IMAGE_ID)
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(image_archive, "_save", save)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    state["archive"] = archive.read_bytes()
    state["tmp"] = tmp_path / "tmp"
    return state


def targets(*names: str) -> list[image_push.HostTarget]:
    # The session object is the host's name: the fake open_channel finds the host's helper by it.
    return [image_push.HostTarget(host(n), client=n) for n in names]  # type: ignore[arg-type]


def push(names: tuple[str, ...], **kwargs: Any) -> image_push.PushReport:
    return image_push.push_image(
        targets(*names),
        "registry:5000/img@sha256:" + "a" * 64,
        engine_for=lambda h: ("sudo", "-n", "podman"),
        **kwargs,
    )


def test_hosts_that_have_the_image_are_skipped_and_the_archive_is_made_once(cluster: dict[str, Any]) -> None:
    cluster["helpers"] = {
        "node1": FakeHelper("have"),
        "node2": FakeHelper("need"),
        "node3": FakeHelper("need"),
    }
    report = push(("node1", "node2", "node3"))
    assert [(h.host, h.state) for h in report.hosts] == [
        ("node1", "had"),
        ("node2", "loaded"),
        ("node3", "loaded"),
    ]
    assert cluster["saves"] == 1
    assert cluster["helpers"]["node1"].received == b""
    for name in ("node2", "node3"):
        helper = cluster["helpers"][name]
        header = json.loads(bytes(helper.received).split(b"\n", 1)[0])
        assert helper.archive == cluster["archive"]
        assert header == {
            "size": len(cluster["archive"]),
            "sha256": __import__("hashlib").sha256(cluster["archive"]).hexdigest(),
        }
    assert report.error() is None
    assert report.image_id == IMAGE_ID and report.archive_bytes == len(cluster["archive"])
    assert list(cluster["tmp"].iterdir()) == []  # the saved archive's folder is gone


def test_the_helper_gets_the_image_id_the_tag_and_the_engine_command(cluster: dict[str, Any]) -> None:
    cluster["helpers"] = {"node1": FakeHelper("have")}
    push(("node1",))
    command = cluster["commands"]["node1"]
    assert command.startswith("python3 -c ")
    assert command.endswith(f" {IMAGE_ID} registry:5000/img:gpuprov-dc2e9b9faa20 sudo -n podman")


def test_when_every_host_has_it_nothing_is_saved(cluster: dict[str, Any]) -> None:
    cluster["helpers"] = {n: FakeHelper("have") for n in ("node1", "node2")}
    report = push(("node1", "node2"))
    assert cluster["saves"] == 0 and report.archive_bytes == 0
    assert report.names("had") == ["node1", "node2"]


def test_a_full_disk_on_one_host_is_one_line_naming_it_and_the_others_load(cluster: dict[str, Any]) -> None:
    full = (RECORDED / "podman-4.3-load-full-disk.txt").read_text()
    why = "podman load failed: " + image_load.last_line(full, 125)
    cluster["helpers"] = {
        "node1": FakeHelper("need", (1, b"", why.encode() + b"\n")),
        "node2": FakeHelper("need"),
    }
    report = push(("node1", "node2"))
    assert report.names("loaded") == ["node2"]
    error = report.error()
    assert error is not None and error.exit_code == ExitCode.PREFLIGHT_FAILED
    assert "\n" not in error.message
    assert "node1: podman load failed: * docker-archive: writing blob: storing blob" in error.message
    assert "no space left on device" in error.message and "rerun" in error.message


def test_a_lost_session_is_unreachable(cluster: dict[str, Any]) -> None:
    helper = FakeHelper("need", (-1, b"", b""))

    def broken(h: FakeHelper) -> None:
        raise ssh.SessionLost("Socket is closed", OSError("Socket is closed"))

    helper.on_send = broken
    cluster["helpers"] = {"node1": helper}
    report = push(("node1",))
    error = report.error()
    assert error is not None and error.exit_code == ExitCode.HOSTS_UNREACHABLE
    assert "node1: SSH failed" in error.message


def test_an_engine_the_helper_cannot_ask_fails_that_host_only(cluster: dict[str, Any]) -> None:
    cluster["helpers"] = {
        "node1": FakeHelper(
            "", (1, b"", b"sudo -n podman image inspect failed: sudo: a password is required\n")
        ),
        "node2": FakeHelper("have"),
    }
    report = push(("node1", "node2"))
    assert report.hosts[0].reason == "sudo -n podman image inspect failed: sudo: a password is required"
    assert report.names("had") == ["node2"]


def test_the_fan_out_is_bounded(cluster: dict[str, Any]) -> None:
    names = ("node1", "node2", "node3", "node4")
    cluster["helpers"] = {n: FakeHelper("need") for n in names}
    running: set[str] = set()
    most = [0]
    lock = threading.Lock()
    # Two sends meet here before either goes on: a push that sent to one host at a time would time out
    # (BrokenBarrierError), so the bound is reached on every run, however the threads are scheduled.
    pair = threading.Barrier(2, timeout=10)

    def track(name: str) -> Any:
        def on_send(h: FakeHelper) -> None:
            with lock:
                running.add(name)
                most[0] = max(most[0], len(running))
            pair.wait()

        return on_send

    for name in names:
        cluster["helpers"][name].on_send = track(name)
        original = cluster["helpers"][name].exit_status

        def ended(timeout: float | None = None, name: str = name, original: Any = original) -> int:
            with lock:
                running.discard(name)
            return int(original(timeout))

        cluster["helpers"][name].exit_status = ended
    report = push(names, max_parallel=2)
    assert report.names("loaded") == list(names)
    assert most[0] == 2


def test_ctrl_c_stops_every_load_and_says_so_in_one_line(cluster: dict[str, Any]) -> None:
    names = ("node1", "node2", "node3")
    cluster["helpers"] = {
        "node1": FakeHelper("have"),
        "node2": FakeHelper("need"),
        "node3": FakeHelper("need"),
    }
    sent = [0]

    def press_ctrl_c(h: FakeHelper) -> None:
        sent[0] += 1
        if sent[0] == 3:
            interrupts._requested.set()  # what the SIGINT handler of interrupts.deferred() does

    for name in ("node2", "node3"):
        cluster["helpers"][name].on_send = press_ctrl_c
    with pytest.raises(image_push.PushInterrupted) as caught:
        push(names)
    assert caught.value.exit_code == ExitCode.INTERRUPTED
    assert caught.value.message == (
        "interrupted during the image push: stopped the push to 2 host(s); nothing half-loaded is left"
    )
    for name in ("node2", "node3"):  # their input was ended: each helper stops its load and exits
        assert cluster["helpers"][name].input_ended.is_set()
        assert len(cluster["helpers"][name].archive) < len(cluster["archive"])
        assert cluster["helpers"][name].closed
    assert list(cluster["tmp"].iterdir()) == []


# ----- the host helper's decisions, on the real engines' outputs -----------------------------------------


@pytest.mark.parametrize(
    ("recorded", "rc"), [("docker-20.10-inspect-missing.txt", 1), ("podman-4.3-inspect-missing.txt", 125)]
)
def test_the_helper_reads_an_absent_image_as_need(
    monkeypatch: pytest.MonkeyPatch, recorded: str, rc: int
) -> None:
    text = (RECORDED / recorded).read_text()
    monkeypatch.setattr(image_load, "engine_run", lambda engine, args: (rc, "", text))
    assert image_load.has_image(["docker"], IMAGE_ID) is False


def test_the_helper_refuses_an_engine_it_cannot_ask(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (RECORDED / "docker-20.10-inspect-no-daemon.txt").read_text()
    monkeypatch.setattr(image_load, "engine_run", lambda engine, args: (1, "", text))
    with pytest.raises(image_load.Problem, match="docker image inspect failed: Cannot connect"):
        image_load.has_image(["docker"], IMAGE_ID)


@pytest.mark.parametrize("out", [IMAGE_ID, HEX])  # docker prints the sha256: prefix, podman does not
def test_the_helper_compares_image_ids_with_or_without_prefix(
    monkeypatch: pytest.MonkeyPatch, out: str
) -> None:
    monkeypatch.setattr(image_load, "engine_run", lambda engine, args: (0, out + "\n", ""))
    assert image_load.has_image(["podman"], IMAGE_ID) is True


def test_the_helper_names_the_line_that_says_why_a_load_failed() -> None:
    gzip_refused = (RECORDED / "podman-4.3-load-gzip-stdin.txt").read_text()
    assert image_load.last_line(gzip_refused, 125) == (
        "* docker-archive: loading tar component manifest.json: archive/tar: invalid tar header"
    )
    truncated = (RECORDED / "docker-20.10-load-truncated.txt").read_text()
    assert image_load.last_line(truncated, 1) == "Error processing tar file(exit status 1): unexpected EOF"


@pytest.mark.parametrize(
    ("engine", "prefix", "own"),
    [
        (["docker"], [], ["docker"]),
        (["sudo", "-n", "podman"], ["sudo", "-n"], ["podman"]),
        (["podman", "--root", "/x"], [], ["podman", "--root", "/x"]),
        (["/usr/bin/docker"], [], ["/usr/bin/docker"]),
    ],
)
def test_the_helper_splits_a_prefix_from_the_engine(
    engine: list[str], prefix: list[str], own: list[str]
) -> None:
    assert image_load.split_engine(engine) == (prefix, own)


@pytest.mark.parametrize(
    ("recorded", "rc"), [("docker-20.10-tag-missing.txt", 1), ("podman-4.3-tag-missing.txt", 125)]
)
def test_a_load_that_left_another_image_fails_its_tag(
    monkeypatch: pytest.MonkeyPatch, recorded: str, rc: int
) -> None:
    text = (RECORDED / recorded).read_text()
    monkeypatch.setattr(image_load, "engine_run", lambda engine, args: (rc, "", text))
    with pytest.raises(image_load.Problem, match="the load finished but the engine has no image sha256:dc2e"):
        image_load.check_loaded(["docker"], IMAGE_ID, "repo/img:gpuprov-dc2e9b9faa20")
    monkeypatch.setattr(image_load, "engine_run", lambda engine, args: (0, "", ""))
    image_load.check_loaded(["docker"], IMAGE_ID, "repo/img:gpuprov-dc2e9b9faa20")


# ----- launch's --push-image: image_delivery calls the real push_image ----------------------------------


class NamedClient(str):
    """A session the fake helpers are found by (the host's name) that image_delivery can close."""

    closed = False

    def close(self) -> None:
        type(self).closed = True


def test_launch_pushes_into_the_store_preflight_runs_from(
    cluster: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuprov.launch import image_delivery
    from gpuprov.launch.environments import container_run

    questions: dict[str, str] = {}

    def run(client: str, command: str, **kwargs: Any) -> ssh.Result:
        questions[client] = command
        answer = {"node1": "podman sudo 0\n", "node2": "docker user 0\n"}[client]
        return ssh.Result(0, answer, "")

    monkeypatch.setattr(ssh, "connect", lambda h, **kw: NamedClient(h.name))
    monkeypatch.setattr(ssh, "run", run)
    cluster["helpers"] = {"node1": FakeHelper("need"), "node2": FakeHelper("have")}
    node1 = host("node1")
    node1 = Host(**{**node1.__dict__, "vars": {"container_runtime_engine": "podman"}})
    report = image_delivery.push_missing([node1, host("node2")], "registry:5000/img@sha256:" + "a" * 64)
    # the engine is chosen on the host by preflight's own shell (sudo -n podman: root's store)
    assert container_run.engine_via() in questions["node1"]
    assert "for e in podman;" in questions["node1"] and "for e in docker podman;" in questions["node2"]
    assert cluster["commands"]["node1"].endswith(" registry:5000/img:gpuprov-dc2e9b9faa20 sudo -n podman")
    assert cluster["commands"]["node2"].endswith(" registry:5000/img:gpuprov-dc2e9b9faa20 docker")
    assert report.image_id == IMAGE_ID and report.names("loaded") == ["node1"]
    assert NamedClient.closed


def test_launch_stops_with_one_line_when_a_host_cannot_load_or_has_no_engine(
    cluster: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuprov.errors import GpuprovError
    from gpuprov.launch import image_delivery

    answers = {"node1": "podman sudo 0\n", "node2": "podman sudo 0\n"}
    monkeypatch.setattr(ssh, "connect", lambda h, **kw: NamedClient(h.name))
    monkeypatch.setattr(ssh, "run", lambda client, command, **kw: ssh.Result(0, answers[client], ""))
    full = b"podman load failed: no space left on device\n"
    cluster["helpers"] = {"node1": FakeHelper("need", (1, b"", full)), "node2": FakeHelper("need")}
    image = "registry:5000/img@sha256:" + "a" * 64
    with pytest.raises(GpuprovError) as caught:
        image_delivery.push_missing([host("node1"), host("node2")], image)
    assert caught.value.exit_code == ExitCode.PREFLIGHT_FAILED
    assert "node1: podman load failed: no space left on device" in caught.value.message
    answers["node2"] = "none\n"
    with pytest.raises(GpuprovError, match=r"^--push-image: node2 has no usable container engine \(none\)"):
        image_delivery.push_missing([host("node1"), host("node2")], image)
