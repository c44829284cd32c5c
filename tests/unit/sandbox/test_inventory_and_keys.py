import configparser
import shlex
import stat
import subprocess
from pathlib import Path

from gpuprov.sandbox import inventory, keys


def context(tmp_path: Path) -> inventory.InventoryContext:
    return inventory.InventoryContext(
        sandbox="t",
        user="gpuprov",
        private_key=tmp_path / "id_ed25519",
        known_hosts=tmp_path / "known_hosts",
        mirror_url="http://10.0.0.9",
        mirror_key_fingerprint="A" * 40,
    )


def test_inventory_lists_nodes_and_keeps_host_key_checking_on(tmp_path):
    nodes = [
        inventory.NodeEntry("node1", "10.0.0.2", "debian12"),
        inventory.NodeEntry("node2", "10.0.0.3", "rocky9"),
    ]
    text = inventory.render(nodes, context(tmp_path))
    parser = configparser.ConfigParser(allow_no_value=True, delimiters=("=",))
    parser.read_string(text.replace("#", ";"))
    hosts = [key for key in parser["gpu_nodes"]]
    assert hosts == ["node1 ansible_host", "node2 ansible_host"]
    ssh_args = shlex.split(parser["gpu_nodes:vars"]["ansible_ssh_common_args"])[0]
    assert "StrictHostKeyChecking=yes" in ssh_args
    assert f"UserKnownHostsFile={tmp_path / 'known_hosts'}" in ssh_args
    assert parser["gpu_nodes:vars"]["gpuprov_mirror_url"] == "http://10.0.0.9"


def test_inventory_points_the_nvidia_roles_at_the_mirror(tmp_path):
    text = inventory.render([inventory.NodeEntry("node1", "10.0.0.2", "debian12")], context(tmp_path))
    parser = configparser.ConfigParser(allow_no_value=True, delimiters=("=",))
    parser.read_string(text.replace("#", ";"))
    group = parser["gpu_nodes:vars"]
    assert group["nvidia_repository_base_url"] == "http://mirror/cuda/repos"  # the mirror's network alias
    assert group["nvidia_repository_key_file"] == "aaaaaaaa.pub"  # last 8 hex of the fingerprint
    assert group["nvidia_repository_key_fingerprint"] == "A" * 40
    assert group["nvidia_repository_metadata_gpgcheck"] == "true"
    assert (group["nvidia_driver_allow_no_gpu"], group["nvidia_driver_reboot"]) == ("true", "false")
    assert group["nvidia_driver_kernel_headers"] == "false"


def test_known_hosts_lines():
    text = inventory.render_known_hosts(
        [("10.0.0.2", "ssh-ed25519 AAAA1"), ("10.0.0.3", "ssh-ed25519 AAAA2")]
    )
    assert text == "10.0.0.2 ssh-ed25519 AAAA1\n10.0.0.3 ssh-ed25519 AAAA2\n"


def test_write_atomic_leaves_no_temp_file(tmp_path):
    target = tmp_path / "sub" / "inventory.ini"
    inventory.write_atomic(target, "x\n")
    assert target.read_text() == "x\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["inventory.ini"]


def test_client_key_is_private_and_reused(tmp_path):
    path = tmp_path / "id_ed25519"
    first = keys.load_or_create_client_key(path, "c")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = keys.load_or_create_client_key(path, "c")
    assert again == first


def test_generated_key_is_one_openssh_accepts(tmp_path):
    pair = keys.generate("node1")
    path = tmp_path / "key"
    keys.write_private(path, pair.private_openssh)
    derived = subprocess.run(
        ["ssh-keygen", "-y", "-f", str(path)], capture_output=True, text=True, check=True
    )
    assert derived.stdout.split()[:2] == pair.public_openssh.split()[:2]
    assert keys.public_key_fields(pair.public_openssh).startswith("ssh-ed25519 ")


def test_sandbox_lock_fits_the_compatibility_table():
    import yaml

    from gpuprov import lock

    data = yaml.safe_load(inventory.render_lock())
    assert data["gpu_stack"]["pytorch_version"] == "2.13.0"
    assert lock.check(data["gpu_stack"]) == []
