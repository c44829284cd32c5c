"""The nvidia_driver role's apt package names (vars/Debian.yml for Ubuntu, vars/Debian-12.yml for Debian)
against the sandbox mirror's stand-ins, which carry the names of NVIDIA's repositories: every name the role
installs, holds and verifies exists at the locked version, and on Debian the set is the whole dependency
tree of nvidia-driver-cuda with the kernel modules of the flavour."""

from __future__ import annotations

import fnmatch

import jinja2
import pytest
import yaml

from gpuprov import resources
from gpuprov.sandbox import standins
from gpuprov.sandbox.standins import drivers
from gpuprov.sandbox.standins.catalogue import DriverRelease

VARS = resources.data_dir("roles") / "nvidia_driver" / "vars"
DRIVER = next(d for d in standins.CATALOGUE.drivers if d.branch == "550")


def role_vars(*files: str, **settings: str) -> dict[str, object]:
    """The vars files loaded in the role's order (later files win), templates rendered with the settings."""
    raw: dict[str, object] = {}
    for name in files:
        raw.update(yaml.safe_load((VARS / name).read_text()))
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    context: dict[str, object] = {**settings, "ansible_facts": {"kernel": "6.1.0-28-amd64"}}

    def render(value: object) -> object:
        if isinstance(value, str):
            for _ in range(5):  # templates refer to other vars that are templates
                if "{{" not in value:
                    break
                value = env.from_string(value).render(context)
            return value
        if isinstance(value, list):
            return [render(v) for v in value]
        if isinstance(value, dict):
            return {k: render(v) for k, v in value.items()}
        return value

    context.update(raw)
    return {name: render(value) for name, value in raw.items()}


def standin_debs() -> dict[str, standins.Package]:
    return {p.name: p for p in standins.deb_packages(standins.CATALOGUE) if p.version == DRIVER.version}


def dependency_tree(top: list[str], debs: dict[str, standins.Package]) -> set[str]:
    """Every stand-in that installing `top` brings, taking the first alternative not excluded by `top`."""
    seen: set[str] = set()
    todo = list(top)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for alternatives in debs[name].depends:
            chosen = [p.name for p in alternatives if p.name in top] or [alternatives[0].name]
            todo += chosen
    return seen


def settings(flavor: str, source: str = "nvidia") -> dict[str, str]:
    return {
        "nvidia_driver_branch": DRIVER.branch,
        "nvidia_driver_version": DRIVER.version,
        "nvidia_driver_flavor": flavor,
        "nvidia_driver_source": source,
    }


@pytest.mark.parametrize("flavor", ["open", "proprietary"])
def test_debian_12_gets_debian_names_of_the_whole_tree(flavor: str) -> None:
    v = role_vars("Debian.yml", "Debian-12.yml", **settings(flavor))
    names = v["__nvidia_driver_apt_packages"]
    assert isinstance(names, list)
    module = "nvidia-kernel-open-dkms" if flavor == "open" else "nvidia-kernel-dkms"
    assert names[:2] == ["nvidia-driver-cuda", module]
    debs = standin_debs()
    assert set(names) <= debs.keys()
    assert set(names) == dependency_tree(names[:2], debs)
    assert not any(n.endswith(f"-{DRIVER.branch}") or f"-{DRIVER.branch}-" in n for n in names)
    assert v["__nvidia_driver_fabricmanager_package"] in debs


@pytest.mark.parametrize("flavor", ["open", "proprietary"])
@pytest.mark.parametrize(("branch", "b"), [("550", "-550"), ("590", "")])
def test_ubuntu_gets_the_headless_set_not_the_desktop_driver(flavor: str, branch: str, b: str) -> None:
    """The compute-only set; up to R580 each name carries "-<branch>", from R590 none does (NVIDIA Driver
    Installation Guide r590, 4.1.1 "Ubuntu 590 and later packages")."""
    release = next(d for d in standins.CATALOGUE.drivers if d.branch == branch)
    v = role_vars(
        "Debian.yml",
        nvidia_driver_branch=branch,
        nvidia_driver_version=release.version,
        nvidia_driver_flavor=flavor,
        nvidia_driver_source="nvidia",
    )
    tail = "-open" if flavor == "open" else ""
    names = v["__nvidia_driver_apt_packages"]
    assert names == [
        f"nvidia-headless{b}{tail}",
        f"nvidia-headless-no-dkms{b}{tail}",
        f"nvidia-dkms{b}{tail}",
        f"nvidia-kernel-source{b}{tail}",
        f"nvidia-kernel-common{b}",
        f"nvidia-utils{b}",
        f"libnvidia-compute{b}",
        f"nvidia-compute-utils{b}",
        f"libnvidia-cfg1{b}",
    ]
    debs = {p.name: p for p in standins.deb_packages(standins.CATALOGUE) if p.version == release.version}
    assert isinstance(names, list) and set(names) <= debs.keys()
    # The headless metapackage's whole tree, and nvidia-smi's package, which it leaves out.
    assert set(names) == dependency_tree([names[0], f"nvidia-utils{b}"], debs)
    assert f"xserver-xorg-video-nvidia{b}" not in dependency_tree(names, debs)
    fabric = v["__nvidia_driver_fabricmanager_package"]
    assert (
        fabric == ("nvidia-fabricmanager-550" if branch == "550" else "nvidia-fabricmanager")
        and fabric in debs
    )


def test_the_desktop_driver_would_pull_the_x_server_driver() -> None:
    """Why the role takes the headless set: nvidia-driver-<b> depends on the desktop stack at its version."""
    tree = dependency_tree(["nvidia-driver-550-open"], standin_debs())
    assert {"xserver-xorg-video-nvidia-550", "libnvidia-gl-550", "nvidia-utils-550"} <= tree


def test_fabric_manager_drops_the_branch_from_its_name_at_r580() -> None:
    names = {
        branch: role_vars("Debian.yml", **{**settings("open"), "nvidia_driver_branch": branch})[
            "__nvidia_driver_fabricmanager_package"
        ]
        for branch in ("570", "580")
    }
    assert names == {"570": "nvidia-fabricmanager-570", "580": "nvidia-fabricmanager"}


def test_ubuntu_source_takes_ubuntus_server_builds() -> None:
    v = role_vars("Debian.yml", **settings("open", source="ubuntu"))
    names = v["__nvidia_driver_apt_packages"]
    assert isinstance(names, list)
    assert names[:2] == ["nvidia-headless-550-server-open", "nvidia-headless-no-dkms-550-server-open"]
    assert all("-550-server" in name for name in names)


def test_the_version_pin_covers_every_driver_package() -> None:
    """The apt preferences the role writes must match every name of both sets (fnmatch, as apt does)."""
    patterns = role_vars("Debian.yml", **settings("open"))["__nvidia_driver_apt_pin_patterns"]
    assert isinstance(patterns, list)
    driver_debs = [n for n in standin_debs() if not n.startswith("cuda-drivers-")]
    for name in driver_debs:
        assert any(fnmatch.fnmatchcase(name, p) for p in patterns), name


@pytest.mark.parametrize(
    ("release_vars", "branch", "name"),
    [
        ((), "570", "nvidia-fabric-manager"),  # EL8: the family's settings only
        ((), "580", "nvidia-fabricmanager"),
        ((), "590", "nvidia-fabricmanager"),
        (("RedHat-9.yml",), "570", "nvidia-fabric-manager"),
        (("RedHat-9.yml",), "580", "nvidia-fabricmanager"),
        (("RedHat-9.yml",), "590", "nvidia-fabricmanager"),
    ],
)
def test_el_fabric_manager_name_follows_nvidias_rule(
    release_vars: tuple[str, ...], branch: str, name: str
) -> None:
    """NVIDIA's rhel8 and rhel9 repositories rename fabric manager from R580 (gpu-driver-container
    rhel8/install.sh and rhel9/install.sh, fabricmanager_install): EL8 reads RedHat.yml alone, EL9 adds
    RedHat-9.yml, and both must ask for nvidia-fabricmanager-<version> from branch 580."""
    settings = role_vars(
        "RedHat.yml", *release_vars, nvidia_driver_branch=branch, nvidia_driver_flavor="open"
    )
    assert str(settings["__nvidia_driver_fabricmanager_package"]).strip() == name


@pytest.mark.parametrize("branch", ["570", "580", "590"])
def test_the_rpm_stand_ins_name_fabric_manager_as_the_role_asks_for_it(branch: str) -> None:
    release = DriverRelease(branch=branch, version=f"{branch}.1.2", cuda="12.8")
    rpms = {p.name for p in drivers.rpm_driver(release)}
    wanted = role_vars("RedHat.yml", nvidia_driver_branch=branch, nvidia_driver_flavor="open")
    assert str(wanted["__nvidia_driver_fabricmanager_package"]).strip() in rpms


@pytest.mark.parametrize("branch", ["570", "580"])
def test_the_apt_stand_ins_name_fabric_manager_as_the_role_asks_for_it(branch: str) -> None:
    release = DriverRelease(branch=branch, version=f"{branch}.1.2", cuda="12.8")
    debs = {p.name for p in drivers.deb_driver(release) + drivers.deb_driver_debian(release)}
    # Ubuntu reads vars/Debian.yml alone, Debian 12 adds vars/Debian-12.yml.
    for vars_files in (("Debian.yml",), ("Debian.yml", "Debian-12.yml")):
        wanted = role_vars(*vars_files, **{**settings("open"), "nvidia_driver_branch": branch})
        assert wanted["__nvidia_driver_fabricmanager_package"] in debs


R590 = next(d for d in standins.CATALOGUE.drivers if d.branch == "590")


def r590_debs() -> dict[str, standins.Package]:
    return {p.name: p for p in standins.deb_packages(standins.CATALOGUE) if p.version == R590.version}


def test_ubuntus_own_archive_keeps_the_branch_in_the_names_from_r590() -> None:
    """Ubuntu's archive still names its builds per branch (nvidia-dkms-595 on packages.ubuntu.com)."""
    v = role_vars(
        "Debian.yml",
        nvidia_driver_branch="590",
        nvidia_driver_version=R590.version,
        nvidia_driver_flavor="open",
        nvidia_driver_source="ubuntu",
    )
    names = v["__nvidia_driver_apt_packages"]
    assert isinstance(names, list)
    assert names[0] == "nvidia-headless-590-server-open" and all("-590-server" in n for n in names)


def test_r590_has_no_cuda_drivers_of_its_branch() -> None:
    """cuda-drivers-580 "will be removed", cuda-drivers stays (the guide's table of renames)."""
    debs = r590_debs()
    assert "cuda-drivers" in debs and not any(n.startswith("cuda-drivers-") for n in debs)
    assert "cuda-drivers-570" in standin_debs_of("570")


def standin_debs_of(branch: str) -> set[str]:
    release = next(d for d in standins.CATALOGUE.drivers if d.branch == branch)
    return {p.name for p in standins.deb_packages(standins.CATALOGUE) if p.version == release.version}


@pytest.mark.parametrize("old", ["550", "570"])
@pytest.mark.parametrize("flavor", ["open", "proprietary"])
def test_each_r590_package_excludes_its_older_branch_counterpart(old: str, flavor: str) -> None:
    """Moving between the schemes (an upgrade to R590 or a downgrade from it) must replace, not add: every
    package the role names on one side conflicts with its counterpart on the other, through Conflicts on a
    name the other one is or provides (as the stand-ins' control files say)."""
    new = role_vars("Debian.yml", **{**settings(flavor), "nvidia_driver_branch": "590"})[
        "__nvidia_driver_apt_packages"
    ]
    older = role_vars("Debian.yml", **{**settings(flavor), "nvidia_driver_branch": old})[
        "__nvidia_driver_apt_packages"
    ]
    assert isinstance(new, list) and isinstance(older, list)
    debs = {**{p.name: p for p in standins.deb_packages(standins.CATALOGUE)}}
    for new_name, old_name in zip(new, older, strict=True):
        if old_name.startswith("nvidia-headless-no-dkms"):
            continue  # no group of its own: it goes when the packages it needs at its version go
        a, b = debs[new_name], debs[old_name]
        a_names = {a.name, *([a.exclusive_group] if a.exclusive_group else [])}
        b_names = {b.name, *([b.exclusive_group] if b.exclusive_group else [])}
        a_conflicts = {*a.conflicts, *([a.exclusive_group] if a.exclusive_group else [])}
        b_conflicts = {*b.conflicts, *([b.exclusive_group] if b.exclusive_group else [])}
        assert (a_conflicts & b_names) or (b_conflicts & a_names), (new_name, old_name)


def test_the_version_pin_covers_the_r590_names() -> None:
    patterns = role_vars("Debian.yml", **settings("open"))["__nvidia_driver_apt_pin_patterns"]
    assert isinstance(patterns, list)
    for name in r590_debs():
        assert any(fnmatch.fnmatchcase(name, p) for p in patterns) or name == "cuda-drivers", name


@pytest.mark.parametrize(("flavor", "suffix"), [("open", "-open"), ("proprietary", "")])
def test_canonicals_precompiled_modules_are_named_as_ubuntu_names_them(flavor: str, suffix: str) -> None:
    """linux-modules-nvidia-<branch>-server[-open]-<kernel release> (packages.ubuntu.com, e.g.
    linux-modules-nvidia-580-server-open-7.0.0-1016-nvidia); the role adds the kernel release."""
    v = role_vars("Debian.yml", **settings(flavor, source="ubuntu"))
    assert v["__nvidia_driver_precompiled_prefix"] == f"linux-modules-nvidia-{DRIVER.branch}-server{suffix}-"
    assert f"nvidia-kernel-common-{DRIVER.branch}-server" in v["__nvidia_driver_apt_packages"]  # type: ignore[operator]
