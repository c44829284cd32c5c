"""Inventories read by Ansible's own loader: hosts, group_vars/host_vars, each mistake as one line."""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gpuprov import hosts
from gpuprov.errors import BadInput


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def bad(path: Path) -> str:
    with pytest.raises(BadInput) as info:
        hosts.load(path)
    message = info.value.message
    assert "\n" not in message
    return message


def test_ini_with_group_vars_and_host_vars(tmp_path: Path) -> None:
    inventory = write(
        tmp_path / "inventory.ini",
        "[gpu_nodes]\n"
        "node1 ansible_host=10.0.0.1\n"
        "node2 ansible_host=10.0.0.2 ansible_port=2222\n"
        "[login]\n"
        "head ansible_host=10.0.0.9\n"
        "[gpu_nodes:vars]\n"
        "ansible_user=ops\n"
        "ansible_ssh_common_args='-o UserKnownHostsFile=/etc/gpuprov/kh -o StrictHostKeyChecking=yes'\n",
    )
    write(
        tmp_path / "group_vars" / "all" / "stack.yml",
        "gpu_stack:\n  cuda: '12.4'\n  driver_branch: 550\n"
        "cuda_home: '/usr/local/cuda-{{ gpu_stack.cuda }}'\n",
    )
    write(tmp_path / "group_vars" / "gpu_nodes.yml", "ansible_ssh_private_key_file: ~/.ssh/gpu\n")
    write(
        tmp_path / "host_vars" / "node2.yml",
        "ansible_user: admin\nansible_become: true\nansible_become_password: s3cret\nnic: ens5\n",
    )

    inventory_obj = hosts.load(inventory)

    assert inventory_obj.group == "gpu_nodes"
    assert inventory_obj.names == ["node1", "node2"]  # not 'head': only gpu_nodes
    node1, node2 = inventory_obj.hosts
    assert (node1.address, node1.port, node1.user) == ("10.0.0.1", 22, "ops")
    assert (node2.address, node2.port, node2.user) == ("10.0.0.2", 2222, "admin")
    assert node1.key_file == Path("~/.ssh/gpu").expanduser()
    assert node1.known_hosts == Path("/etc/gpuprov/kh")
    assert node1.become is False and node2.become is True
    assert node2.become_password == "s3cret"
    assert "s3cret" not in repr(node2)
    assert node1.vars["gpu_stack"] == {"cuda": "12.4", "driver_branch": 550}
    assert node1.vars["cuda_home"] == "/usr/local/cuda-12.4"  # templated
    assert node2.vars["nic"] == "ens5" and "nic" not in node1.vars
    assert type(node1.vars["gpu_stack"]["cuda"]) is str  # plain values, not Ansible's tagged ones


def test_yaml_inventory_without_gpu_nodes_takes_all_hosts(tmp_path: Path) -> None:
    inventory = write(
        tmp_path / "hosts.yml",
        "all:\n"
        "  vars:\n"
        "    gpuprov_known_hosts_file: /tmp/kh\n"
        "  children:\n"
        "    rack1:\n"
        "      hosts:\n"
        "        a: {ansible_host: 10.1.0.1}\n"
        "        b: {ansible_host: 10.1.0.2, ansible_user: bob}\n",
    )
    loaded = hosts.load(inventory)
    assert loaded.group == "all"
    assert loaded.names == ["a", "b"]
    a, b = loaded.hosts
    assert a.user == getpass.getuser() and b.user == "bob"
    assert a.known_hosts == Path("/tmp/kh")
    assert a.key_file is None


def test_known_hosts_default_and_runtime_templates_kept(tmp_path: Path) -> None:
    inventory = write(
        tmp_path / "inv.ini", "[gpu_nodes]\nn1\n[gpu_nodes:vars]\nx='{{ ansible_facts.hostname }}'\n"
    )
    (n1,) = hosts.load(inventory).hosts
    assert n1.address == "n1"
    assert n1.known_hosts == Path("~/.ssh/known_hosts").expanduser()
    assert n1.vars["x"] == "{{ ansible_facts.hostname }}"  # needs facts: left for Ansible


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ("-o UserKnownHostsFile=/a/kh -o StrictHostKeyChecking=yes", "/a/kh"),
        ("-oUserKnownHostsFile=/b/kh", "/b/kh"),
        ("-o 'userknownhostsfile /c/kh'", "/c/kh"),
        ("-o 'UserKnownHostsFile=/d/kh /e/kh'", "/d/kh /e/kh"),
        ("-o StrictHostKeyChecking=yes", None),
        ("", None),
    ],
)
def test_ssh_option(args: str, expected: str | None) -> None:
    assert hosts.ssh_option(args, "UserKnownHostsFile") == expected


def test_missing_inventory(tmp_path: Path) -> None:
    message = bad(tmp_path / "nope.ini")
    assert (
        message
        == f"inventory {tmp_path / 'nope.ini'} does not exist; give the path of an INI or YAML inventory"
    )


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to drop to nobody"
)
def test_unreadable_inventory(tmp_path: Path) -> None:
    # root reads every file, so the check runs as 'nobody', as a user without access would.
    folder = Path(tempfile.mkdtemp(prefix="gpuprov-test-"))  # pytest's tmp_path is private to root
    folder.chmod(0o755)
    inventory = write(folder / "inv.ini", "[gpu_nodes]\nn1\n")
    inventory.chmod(0o600)
    code = (
        "from gpuprov import hosts\n"
        "from gpuprov.errors import BadInput\n"
        "try:\n"
        f"    hosts.load({str(inventory)!r})\n"
        "except BadInput as e:\n"
        "    print(e.message)\n"
    )
    proc = subprocess.run(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": "/tmp"},
        timeout=60,
    )
    shutil.rmtree(folder)
    assert proc.stdout.strip() == (
        f"inventory {inventory} is not readable by user nobody; check its permissions"
    ), proc.stderr


def test_ini_syntax_error_says_which_line(tmp_path: Path) -> None:
    inventory = write(
        tmp_path / "inv.ini", "[gpu_nodes]\nn1 ansible_host=10.0.0.1\nn2 ansible_port=22 oops\n"
    )
    message = bad(inventory)
    assert message.startswith(f"{inventory} line 3 ('n2 ansible_port=22 oops'): ")
    assert "Expected key=value host variable assignment, got: oops" in message


def test_ini_broken_section_header(tmp_path: Path) -> None:
    inventory = write(tmp_path / "inv.ini", "# cluster\n[gpu_nodes\nn1\n")
    assert bad(inventory).startswith(f"{inventory} line 2 ('[gpu_nodes'): ")


def test_yaml_syntax_error_says_line_and_column(tmp_path: Path) -> None:
    inventory = write(tmp_path / "inv.yml", "all:\n  children:\n    gpu_nodes:\n      hosts: [\n")
    message = bad(inventory)
    assert message.startswith(f"{inventory} line 5 column 1: YAML parsing failed")


def test_group_vars_syntax_error_names_that_file(tmp_path: Path) -> None:
    inventory = write(tmp_path / "inv.ini", "[gpu_nodes]\nn1\n")
    broken = write(tmp_path / "group_vars" / "gpu_nodes" / "net.yml", "mtu: [9000,\n")
    assert bad(inventory).startswith(f"{broken} line 2 column 1: YAML parsing failed")


def test_empty_gpu_nodes_group(tmp_path: Path) -> None:
    inventory = write(tmp_path / "inv.ini", "[gpu_nodes]\n\n[login]\nhead\n")
    assert bad(inventory) == f"{inventory}: group [gpu_nodes] has no hosts; add the GPU servers to it"


def test_inventory_without_any_host(tmp_path: Path) -> None:
    inventory = write(tmp_path / "inv.yml", "all:\n  vars:\n    x: 1\n")
    assert bad(inventory) == f"{inventory}: the inventory has no hosts; add the GPU servers to it"


def test_duplicate_host_in_ini_group(tmp_path: Path) -> None:
    inventory = write(
        tmp_path / "inv.ini",
        "[gpu_nodes]\nn1 ansible_host=10.0.0.1\nn2 ansible_host=10.0.0.2\nn1 ansible_host=10.0.0.3\n",
    )
    assert bad(inventory) == (
        f"{inventory} line 4: host n1 is listed twice in [gpu_nodes] (first on line 2); keep one entry"
    )


def test_host_in_two_groups_is_not_a_duplicate(tmp_path: Path) -> None:
    inventory = write(tmp_path / "inv.ini", "[gpu_nodes]\nn1 ansible_host=10.0.0.1\n[rack1]\nn1\n")
    assert hosts.load(inventory).names == ["n1"]


def test_duplicate_host_in_yaml(tmp_path: Path) -> None:
    inventory = write(
        tmp_path / "inv.yml",
        "gpu_nodes:\n  hosts:\n    n1:\n      ansible_host: 10.0.0.1\n"
        "    n1:\n      ansible_host: 10.0.0.2\n",
    )
    assert (
        bad(inventory)
        == f"{inventory} line 5 column 5: YAML parsing failed: Found duplicate mapping key 'n1'."
    )


def test_two_names_for_one_machine(tmp_path: Path) -> None:
    inventory = write(
        tmp_path / "inv.ini", "[gpu_nodes]\nn1 ansible_host=10.0.0.1\nn1b ansible_host=10.0.0.1\n"
    )
    assert (
        bad(inventory) == f"{inventory}: hosts n1 and n1b are the same machine (10.0.0.1:22); keep one entry"
    )


def test_bad_port(tmp_path: Path) -> None:
    inventory = write(tmp_path / "inv.ini", "[gpu_nodes]\nn1 ansible_port=ssh\n")
    assert bad(inventory) == "host n1: ansible_port 'ssh' is not a number"


def test_yaml_that_is_not_an_inventory(tmp_path: Path) -> None:
    inventory = write(tmp_path / "inv.yml", "- just\n- a list\n")
    assert "a YAML inventory is a mapping of groups" in bad(inventory)


def test_sample_inventory() -> None:
    from gpuprov import resources

    sample = hosts.load(resources.data_dir("inventory") / "sample" / "inventory.ini")
    assert sample.names == ["gpu01", "gpu02"]
    gpu01 = sample.hosts[0]
    assert (gpu01.address, gpu01.user) == ("10.0.0.11", "ubuntu")
    assert gpu01.known_hosts == Path("~/.ssh/known_hosts").expanduser()
    assert "StrictHostKeyChecking=yes" in gpu01.vars["ansible_ssh_common_args"]
    assert "gpu_stack" in gpu01.vars  # the lock, from group_vars/all/gpu_stack.yml


def test_host_names_are_capped_at_200_for_bootstrap_and_jobs_alike(tmp_path: Path) -> None:
    longest, too_long = "n" * 200, "n" * 201
    assert hosts.is_host_name(longest) and not hosts.is_host_name(too_long)
    ok = write(tmp_path / "ok.ini", f"[gpu_nodes]\n{longest} ansible_host=192.0.2.10\n")
    assert hosts.load(ok).names == [longest]
    refused = write(tmp_path / "long.ini", f"[gpu_nodes]\n{too_long} ansible_host=192.0.2.10\n")
    assert f"host name '{too_long}' is not valid" in bad(refused)
    assert len(f"{longest}.log") <= os.pathconf(tmp_path, "PC_NAME_MAX")  # a job's log file can be named


def ssh_files_refused(targets: list[hosts.Host], key_setting: str = "ansible_ssh_private_key_file") -> str:
    with pytest.raises(BadInput) as info:
        hosts.check_ssh_files(targets, where="", fix="fix the path", key_setting=key_setting)
    return info.value.message


def test_check_ssh_files_for_launch_and_job_records(tmp_path: Path) -> None:
    key, known = write(tmp_path / "id_ed25519", "key\n"), tmp_path / "known_hosts"
    good = hosts.Host("node1", "192.0.2.10", 22, "u", key, known)  # a known_hosts not there yet is fine
    hosts.check_ssh_files([good], where="", fix="fix the path")
    missing = hosts.Host("node2", "192.0.2.11", 22, "u", tmp_path / "gone", known)
    assert ssh_files_refused(
        [good, missing], key_setting="ansible_ssh_private_key_file when job J was launched"
    ) == (
        f"node2: SSH key {tmp_path / 'gone'} (ansible_ssh_private_key_file when job J was launched) does not "
        "exist; fix the path"
    )
    directory = hosts.Host("node3", "192.0.2.12", 22, "u", key, tmp_path)
    assert ssh_files_refused([good, directory]) == (
        f"node3: known_hosts file {tmp_path} is a directory; fix the path"
    )
    # The launcher reads a path as written; only bootstrap leaves a template to Ansible.
    templated = hosts.Host("node4", "192.0.2.13", 22, "u", Path("{{ key_dir }}/id"), known)
    assert "SSH key {{ key_dir }}/id (ansible_ssh_private_key_file) does not exist" in ssh_files_refused(
        [templated]
    )
    hosts.check_ssh_files([templated], where="", fix="fix the path", ansible_templates=True)
