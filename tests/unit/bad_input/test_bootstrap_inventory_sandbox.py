"""What gpuprov refuses in an inventory, a lock, a path or a setting, and why.

Each case drives gpuprov's command line (or the module that reads the input) on a bad file in a temporary
directory: main() in this process (tests/unit/in_process.py), the real `gpuprov` command where the case is
about the command itself (an empty path in a directory Ansible would run, a port that is not SSH). Bad input
ends with one line on stderr and exit code 2, before any host is contacted and before a run directory is made;
nothing of the bad value that could be a secret, a screenful or a second line gets echoed. The inventories'
addresses are in 192.0.2.0/24 (TEST-NET-1): nothing answers there, so a check that reached a host would show
as exit 6, not 2.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuprov import console, hosts, lock
from gpuprov.errors import BadInput
from tests.unit import in_process

GPUPROV = [sys.executable, "-m", "gpuprov"]
SAMPLE = Path(__file__).resolve().parents[3] / "inventory" / "sample"
LOCK = (SAMPLE / "group_vars" / "all" / "gpu_stack.yml").read_text()


def gpuprov(*args: str, state: Path, env: dict[str, str] | None = None) -> in_process.Result:
    return in_process.gpuprov(*args, env={"GPUPROV_STATE_DIR": str(state), **(env or {})})


def real_gpuprov(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    """The `gpuprov` command in its own process."""
    env = {**os.environ, "GPUPROV_STATE_DIR": str(state)}
    return subprocess.run([*GPUPROV, *args], capture_output=True, text=True, env=env, timeout=120)


def refused(proc: in_process.Result | subprocess.CompletedProcess[str], state: Path | None = None) -> str:
    """The one error line of a command that refused its input (exit 2, no traceback, no run started)."""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-3000:]
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert lines[0].startswith("error: ")
    if state is not None:
        assert not (state / "runs").exists(), "refused before a run began"
    return lines[0].removeprefix("error: ")


def inventory(folder: Path, text: str = "", name: str = "inventory.ini") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text or "[gpu_nodes]\nnode1 ansible_host=192.0.2.10\nnode2 ansible_host=192.0.2.11\n")
    (folder / "group_vars" / "all").mkdir(parents=True, exist_ok=True)
    (folder / "group_vars" / "all" / "gpu_stack.yml").write_text(LOCK)
    return path


def load_refused(path: Path | str, limit: str | None = None) -> str:
    with pytest.raises(BadInput) as info:
        hosts.load(path, limit=limit)
    return info.value.message


# ----- item 3: a --limit Ansible would read as "every host" --------------------------------------------


@pytest.mark.parametrize("limit", ["", "  ", ",", ":", "[[[", "]", "gpu_nodes[0", "node1[", "node1,[[["])
def test_empty_or_unparsable_limit_is_refused_not_read_as_all(tmp_path: Path, limit: str) -> None:
    # Ansible drops what it cannot split or match: each of these would select every host (or more than
    # named), so `--limit "$UNSET_VAR"` would provision the whole fleet.
    message = load_refused(inventory(tmp_path), limit=limit)
    assert message.startswith("--limit ")


def test_limit_term_that_matches_nothing_is_refused(tmp_path: Path) -> None:
    # `!nodeX` (a typo) would exclude nothing; `node1,nodeX` would quietly drop nodeX.
    path = inventory(tmp_path)
    assert "'!nodeX' matches no host" in load_refused(path, limit="!nodeX")
    assert "'nodeX' matches no host" in load_refused(path, limit="node1,nodeX")
    assert "Invalid host list pattern" in load_refused(path, limit="~(")
    assert hosts.load(path, limit="node1,!node2").names == ["node1"]
    assert hosts.load(path, limit="gpu_nodes[0:1]").names == ["node1", "node2"]


def test_empty_limit_on_the_command_line(tmp_path: Path) -> None:
    state = tmp_path / "state"
    message = refused(gpuprov("bootstrap", str(inventory(tmp_path)), "--limit", "", state=state), state)
    assert message.startswith("--limit is empty; give a host pattern")


# ----- item 4: the lock holds versions, never templates, and a non-version is never echoed ----------------

SECRET = "root:$6$s3cretHASH:19000:0:99999:7:::"
CLOSED_PORTS = (
    "[gpu_nodes]\nnode1 ansible_host=127.0.0.1 ansible_port=1\nnode2 ansible_host=127.0.0.1 ansible_port=2\n"
)


def _lock_with(field: str, value: str) -> str:
    lines = [
        f"  {field}: {value}" if line.strip().startswith(f"{field}:") else line for line in LOCK.splitlines()
    ]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "value",
    [
        "\"{{ lookup('file', '%s') }}\"",  # reads a file into the lock
        "\"{{ lookup('env', 'GPUPROV_TEST_SECRET') }}\"",
        '"{%% if true %%}12.4.1{%% endif %%}"',
    ],
)
def test_template_in_the_lock_is_refused_and_not_resolved(tmp_path: Path, value: str) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text(SECRET + "\n")
    # Preflight reports the lock with the hosts' checks: hosts on closed local ports refuse at once, where
    # TEST-NET addresses would hold the test for the connect timeout.
    path = inventory(tmp_path / "inv", CLOSED_PORTS)
    (tmp_path / "inv" / "group_vars" / "all" / "gpu_stack.yml").write_text(
        _lock_with("cuda_version", value.replace("%s", str(secret_file)).replace("%%", "%"))
    )
    state = tmp_path / "state"
    proc = gpuprov("bootstrap", str(path), "--json", state=state, env={"GPUPROV_TEST_SECRET": SECRET})
    written = "".join(p.read_text() for p in state.rglob("*") if p.is_file())
    for output in (proc.stdout, proc.stderr, written):
        assert "s3cret" not in output
    assert proc.returncode in (2, 6)  # the lock problem, and the hosts do not answer
    assert "gpu_stack.cuda_version is a template (not shown): versions are plain strings" in proc.stdout


@pytest.mark.parametrize("value", [SECRET, "hunter2 hunter2", "x" * 5000, "12.4.1\nroot:x:0:0"])
def test_lock_value_that_is_not_a_version_is_not_echoed(value: str) -> None:
    import yaml

    stack = yaml.safe_load(LOCK)["gpu_stack"]
    assert lock.check(stack) == []
    stack["cuda_version"] = value
    problems = lock.check(stack)
    assert problems and all(value not in p and "hunter2" not in p and "s3cret" not in p for p in problems)
    assert "gpu_stack.cuda_version is a value that is not a version (not shown)" in problems[0]
    stack["cuda_version"] = "12.4"  # a version-like value is still quoted, to show the mistake
    assert "gpu_stack.cuda_version is '12.4': it must be" in lock.check(stack)[0]


# ----- item 5: host names that would reach paths or shells ---------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "../../etc/x ansible_host=192.0.2.10",
        "'node;reboot' ansible_host=192.0.2.10",
        "'node$(id)' ansible_host=192.0.2.10",
        "'node`id`' ansible_host=192.0.2.10",
        "'node 1' ansible_host=192.0.2.10",
        ".hidden ansible_host=192.0.2.10",
    ],
)
def test_host_name_that_is_not_a_name_is_refused(tmp_path: Path, line: str) -> None:
    message = load_refused(inventory(tmp_path, f"[gpu_nodes]\n{line}\n"))
    assert "is not valid: use letters, digits" in message


def test_host_name_from_yaml_and_address_with_shell_characters(tmp_path: Path) -> None:
    path = inventory(tmp_path, "all:\n  hosts:\n    'a/b': {ansible_host: 192.0.2.10}\n", name="hosts.yml")
    assert "host name 'a/b' is not valid" in load_refused(path)
    path = inventory(tmp_path / "2", "[gpu_nodes]\nnode1 ansible_host='10.0.0.1;id'\n")
    assert "ansible_host '10.0.0.1;id' is not a host name or an address" in load_refused(path)
    ok = inventory(tmp_path / "3", "[gpu_nodes]\ngpu-01.example.com\n10.0.0.5\nnode_2 ansible_host=fe80::1\n")
    assert hosts.load(ok).names == ["gpu-01.example.com", "10.0.0.5", "node_2"]


# ----- item 11: ports out of range ---------------------------------------------------------------------


@pytest.mark.parametrize("port", ["99999", "65536", "0", "-5"])
def test_port_out_of_range_is_refused_naming_the_host(tmp_path: Path, port: str) -> None:
    path = inventory(tmp_path, f"[gpu_nodes]\nnode1 ansible_host=192.0.2.10\nnode2 ansible_port={port}\n")
    state = tmp_path / "state"
    message = refused(gpuprov("bootstrap", str(path), state=state), state)
    assert message == f"host node2: ansible_port {int(port)} is out of range; give a TCP port, 1-65535"


# ----- item 12: an empty inventory path ----------------------------------------------------------------


def test_empty_inventory_path_is_not_the_current_directory(tmp_path: Path) -> None:
    # The current directory holds an executable file: Ansible would run it as an inventory script.
    marker = tmp_path / "ran"
    script = tmp_path / "cwd" / "script.sh"
    script.parent.mkdir()
    script.write_text(f"#!/bin/sh\ntouch {marker}\necho '{{}}'\n")
    script.chmod(0o755)
    state = tmp_path / "state"
    for path in ("", " "):
        proc = subprocess.run(
            [*GPUPROV, "bootstrap", path],
            capture_output=True,
            text=True,
            cwd=script.parent,
            env={**os.environ, "GPUPROV_STATE_DIR": str(state)},
            timeout=120,
        )
        assert (
            refused(proc, state) == "the inventory path is empty; give the path of an INI or YAML inventory"
        )
    assert not marker.exists()
    assert "path is empty" in load_refused("")
    message = refused(gpuprov("bootstrap", "-e", "@", str(inventory(tmp_path / "inv")), state=state), state)
    assert message == "-e '@': the file name is empty; give -e @FILE (a YAML or JSON file)"


# ----- items 13, 14: YAML that would hang or crash the loaders -----------------------------------------

LAUGHS = "".join(
    f"    {name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['lol'] * 9)}]\n"
    for prev, name in zip(["", *"abcdefgh"], "abcdefghi", strict=True)
)


def deep(levels: int, open_: str = "[", close: str = "]") -> str:
    return open_ * levels + close * levels


@pytest.mark.parametrize(
    ("where", "text"),
    [
        ("hosts.yml", f"all:\n  vars:\n{LAUGHS}  hosts:\n    node1: {{ansible_host: 192.0.2.10}}\n"),
        ("group_vars/all/laughs.yml", f"x:\n{LAUGHS.replace('    ', '  ')}"),
        ("host_vars/node1.yml", f"x:\n{LAUGHS.replace('    ', '  ')}"),
        ("hosts.yml", f"all:\n  hosts:\n    node1:\n      x: {deep(5000)}\n"),
        ("group_vars/all/deep.yml", f"x: {deep(5000)}\n"),
        ("group_vars/gpu_nodes", "x: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n"),
        ("host_vars/node1.json", '{"x": ' + deep(5000) + "}"),
    ],
)
def test_alias_bomb_and_deep_nesting_are_refused_at_once(tmp_path: Path, where: str, text: str) -> None:
    path = inventory(tmp_path, "[gpu_nodes]\nnode1 ansible_host=192.0.2.10\n")
    if where == "hosts.yml":
        path = inventory(tmp_path, text, name="hosts.yml")
        path.with_name("inventory.ini").unlink()
    else:
        (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / where).write_text(text)
    state = tmp_path / "state"
    message = refused(gpuprov("bootstrap", str(path), state=state), state)
    assert message.startswith(str(tmp_path / where) + ": it ")
    assert "gpuprov refuses to load it, simplify the file" in message


@pytest.mark.parametrize("text", [f"x:\n{LAUGHS.replace('    ', '  ')}", f"x: {deep(5000)}\n"])
def test_vars_file_given_with_e_is_held_to_the_same_limits(tmp_path: Path, text: str) -> None:
    vars_file = tmp_path / "vars.yml"
    vars_file.write_text(text)
    state = tmp_path / "state"
    message = refused(
        gpuprov("bootstrap", str(inventory(tmp_path)), "-e", f"@{vars_file}", state=state), state
    )
    assert message.startswith(f"-e @{vars_file}: it ")


def test_yaml_limits_leave_ordinary_files_alone() -> None:
    from gpuprov import yaml_limits

    for file in SAMPLE.rglob("*.yml"):
        assert yaml_limits.check_file(file) == "mapping"
    assert yaml_limits.check_text(f"x: {deep(yaml_limits.MAX_DEPTH - 1)}") == "mapping"
    shared = "base: &base {a: 1, b: 2}\n" + "".join(f"h{i}: *base\n" for i in range(500))
    assert yaml_limits.check_text(shared) == "mapping"


# ----- item 16: paths the system cannot use -----------------------------------------------------------


def test_inventory_path_too_long(tmp_path: Path) -> None:
    state = tmp_path / "state"
    message = refused(gpuprov("bootstrap", "a" * 100_000, state=state), state)
    assert message.endswith("File name too long; give the path of an INI or YAML inventory")
    assert len(message) < 400  # the 100 KB argument is shortened


@pytest.mark.parametrize("command", [["bootstrap", "INVENTORY"], ["sandbox", "inventory"], ["jobs"]])
def test_state_dir_that_is_a_file(tmp_path: Path, command: list[str]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    args = [str(inventory(tmp_path / "inv")) if arg == "INVENTORY" else arg for arg in command]
    for state in (afile, afile / "below"):
        message = refused(gpuprov(*args, state=state))
        assert message == (
            f"GPUPROV_STATE_DIR={state}: {afile} is a file, not a directory; point GPUPROV_STATE_DIR at a "
            "directory (gpuprov creates it when missing)"
        )


# ----- item 17: messages about the file, not about Ansible's internals ----------------------------------


@pytest.mark.parametrize(
    "data", [os.urandom(3000), b"\x00" * 64, b"[gpu_nodes]\nnode1\n\x89PNG\r\n\x1a\n", b"\xff\xfe[\x00g\x00"]
)
def test_binary_inventory_is_named_as_such(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "inventory.ini"
    path.write_bytes(data)
    message = load_refused(path)
    assert message.startswith(f"inventory {path} is not a text file (binary data at byte ")


@pytest.mark.parametrize(
    ("where", "text", "kind"),
    [
        ("host_vars/node1.yml", "- a\n- b\n", "list"),
        ("group_vars/all/extra.yml", "just a sentence\n", "scalar"),
        ("group_vars/gpu_nodes.json", "[1, 2]", "list"),
    ],
)
def test_vars_file_that_is_not_a_mapping(tmp_path: Path, where: str, text: str, kind: str) -> None:
    path = inventory(tmp_path)
    (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / where).write_text(text)
    message = load_refused(path)
    assert message == (
        f"{tmp_path / where}: a vars file is a mapping of variable names to values, and this one is a "
        f"{kind}; write it as `name: value` lines"
    )
    assert "Tagged" not in message


# ----- item 20: one line, whatever the message quotes ---------------------------------------------------


def test_error_lines_escape_control_characters_and_shorten_long_values(tmp_path: Path) -> None:
    state = tmp_path / "state"
    folder = tmp_path / "a\nb\x1b[31m"
    message = refused(gpuprov("bootstrap", str(folder / "inventory.ini"), state=state), state)
    assert "a\\nb\\x1b[31m/inventory.ini does not exist" in message
    message = refused(gpuprov("bootstrap", "-e", "@" + "x" * 100_000, str(inventory(tmp_path)), state=state))
    assert "characters left out" in message and len(message) < 400


def test_one_line_keeps_short_messages_as_they_are() -> None:
    assert console.one_line("inventory /tmp/x.ini does not exist") == "inventory /tmp/x.ini does not exist"
    assert console.one_line("tab\there\u2028next\udcff") == "tab\\there\\u2028next\\udcff"
    assert len(console.one_line("word " * 10_000)) <= console.MAX_MESSAGE


# ----- item 22: a missing local key file is the inventory's mistake -------------------------------------


@pytest.mark.parametrize("key", ["/nonexistent/id_ed25519", "~/no-such-gpuprov-key", "DIR"])
def test_missing_ssh_key_file_is_bad_input_naming_the_file(tmp_path: Path, key: str) -> None:
    key = str(tmp_path) if key == "DIR" else key
    path = inventory(
        tmp_path / "inv",
        f"[gpu_nodes]\nnode1 ansible_host=192.0.2.10\nnode2 ansible_host=192.0.2.11\n"
        f"[gpu_nodes:vars]\nansible_ssh_private_key_file={key}\n",
    )
    state = tmp_path / "state"
    message = refused(gpuprov("bootstrap", str(path), state=state), state)
    shown = Path(key).expanduser()
    what = "is a directory" if key == str(tmp_path) else "does not exist"
    assert message == (
        f"{path}: host node1 and 1 more host(s): SSH key {shown} (ansible_ssh_private_key_file) {what}; "
        "fix the path in the inventory"
    )


def test_known_hosts_file_that_is_a_directory_is_bad_input(tmp_path: Path) -> None:
    path = inventory(
        tmp_path / "inv",
        f"[gpu_nodes]\nnode1 ansible_host=192.0.2.10 gpuprov_known_hosts_file={tmp_path}\n",
    )
    state = tmp_path / "state"
    message = refused(gpuprov("bootstrap", str(path), state=state), state)
    assert message == (
        f"{path}: host node1: known_hosts file {tmp_path} is a directory; fix the path in the inventory"
    )


# ----- item 15: a port that answers but is not SSH ------------------------------------------------------


@pytest.fixture
def not_ssh() -> Iterator[int]:
    """A local TCP port that answers like a web server."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def test_port_that_is_not_ssh_is_one_line_per_host(tmp_path: Path, not_ssh: int) -> None:
    path = inventory(tmp_path, f"[gpu_nodes]\nnode1 ansible_host=127.0.0.1 ansible_port={not_ssh}\n")
    proc = real_gpuprov("bootstrap", str(path), state=tmp_path / "state")
    assert proc.returncode == 6, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("> ")]
    assert errors == [
        f"error: node1 (127.0.0.1:{not_ssh}): something answers on port {not_ssh} but it is not an SSH "
        "server (no SSH banner); check ansible_host and ansible_port; nothing was applied to any host"
    ]
