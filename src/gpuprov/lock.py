"""The compatibility lock: check that one `gpu_stack` (driver, CUDA, cuDNN, NCCL, PyTorch) fits together.

The table is playbooks/vars/gpu_stack_compat.yml. `gpuprov bootstrap` calls `check` before any host is
touched, and the first play of playbooks/site.yml calls the same function through a filter plugin, so plain
`ansible-playbook` runs are protected too. This module needs only the standard library and PyYAML (which
ansible-core brings): the filter plugin may load it without the rest of gpuprov.
"""

from __future__ import annotations

import calendar
import datetime
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from gpuprov import lock_image

TABLE_FILE = Path("vars") / "gpu_stack_compat.yml"  # relative to the playbooks directory
TABLE_KEY = "gpu_stack_compat"
HOW_TO_ADD = "to add a release, see 'Adding a release to the table' in docs/lock.md"

# The fields of a lock, each with the pattern its value must match.
FIELDS: dict[str, tuple[str, str]] = {
    "driver_branch": (r"\d{3}", 'a driver branch such as "550"'),
    "driver_version": (r"\d{3}\.\d+(\.\d+)?", 'a driver version such as "550.127.08"'),
    "driver_flavor": (r"open|proprietary", '"open" or "proprietary"'),
    "cuda_version": (r"\d+\.\d+\.\d+", 'a CUDA version such as "12.4.1"'),
    "cudnn_version": (r"\d+\.\d+\.\d+\.\d+", 'a cuDNN version such as "9.5.1.17"'),
    "nccl_version": (r"\d+\.\d+\.\d+", 'an NCCL version such as "2.21.5"'),
    "pytorch_version": (r"\d+\.\d+\.\d+", 'a PyTorch version such as "2.5.1"'),
    "pytorch_cuda_tag": (r"cpu|cu\d{3,}", 'a PyTorch wheel tag such as "cu124" or "cpu"'),
}

# Fields a lock may leave out (the component is then not installed), each with its pattern; each belongs to a
# role or feature that is off by default and refuses to run without it. The image fields are lock_image's.
OPTIONAL_FIELDS: dict[str, tuple[str, str]] = {
    # NVIDIA Container Toolkit, for the container_runtime role (container_runtime_enabled).
    "container_toolkit_version": (r"\d+\.\d+\.\d+", 'a toolkit release such as "1.18.0"'),
    # enroot and pyxis, for srun --container-image (roles/slurm_pyxis, slurm_pyxis_enabled).
    "enroot_version": (r"\d+\.\d+\.\d+", 'an enroot release such as "4.1.2"'),
    "pyxis_version": (r"\d+\.\d+\.\d+", 'a pyxis release such as "0.24.0"'),
    # Horovod, built by python_env (docs/horovod.md).
    "horovod_version": (r"\d+\.\d+\.\d+", 'a Horovod release such as "0.28.1"'),
    # The Open MPI release series the mpi role installs from each OS's own packages (roles/mpi/vars/).
    "openmpi_version": (r"\d+\.\d+", 'an Open MPI release series such as "4.1"'),
}
# Every optional field's name, the image's included (what an unknown-field message lists).
OPTIONAL_NAMES: tuple[str, ...] = (*OPTIONAL_FIELDS, *lock_image.OPTIONAL_FIELDS)


def table_path() -> Path:
    """The table shipped with gpuprov (in the checkout or the installed wheel)."""
    from gpuprov import resources  # here, so the filter plugin can load this module on its own

    return resources.data_dir("playbooks") / TABLE_FILE


def load_table(path: Path | None = None) -> Mapping[str, Any]:
    """The `gpu_stack_compat` mapping of the table file."""
    return load_mapping(path or table_path(), TABLE_KEY)


def load_mapping(path: Path, key: str) -> Mapping[str, Any]:
    """The mapping under `key` of a YAML table file (ValueError when there is none)."""
    with open(path) as f:
        data = yaml.safe_load(f)
    if not isinstance(data, Mapping) or not isinstance(data.get(key), Mapping):
        raise ValueError(f"{path}: no '{key}' mapping")
    table: Mapping[str, Any] = data[key]
    return table


def check(gpu_stack: Mapping[str, Any], table: Mapping[str, Any] | None = None) -> list[str]:
    """[] when the lock fits the table, else one message per conflict (the pair and what would fit)."""
    if not isinstance(gpu_stack, Mapping):
        kind = "a template" if isinstance(gpu_stack, str) and "{{" in gpu_stack else type(gpu_stack).__name__
        return [f"gpu_stack must be a mapping of {', '.join(FIELDS)}; got {kind}"]
    problems = _field_problems(gpu_stack)
    if problems:  # the pairs cannot be compared until every field is well formed
        return problems
    tbl = table if table is not None else load_table()
    lock = {name: str(gpu_stack[name]) for name in (*FIELDS, *OPTIONAL_FIELDS) if name in gpu_stack}
    return [
        *_driver_problems(lock, tbl),
        *_cuda_problems(lock, tbl),
        *_cudnn_problems(lock, tbl),
        *_nccl_problems(lock, tbl),
        *_pytorch_problems(lock, tbl),
        *lock_image.driver_problems(gpu_stack, tbl),
        *_horovod_problems(lock, tbl),
        *_toolkit_problems(gpu_stack, tbl),
    ]


# A value is quoted back in messages (and so in the preflight table, gpuprov.log and summary.json) only when
# it looks like a version or a name: anything else may be a secret pasted or read in by mistake.
_SHOWN = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+~_-]{0,31}")


def _shown(value: Any) -> str:
    text = str(value)
    if isinstance(value, (str, int, float)) and _SHOWN.fullmatch(text):
        return repr(value)
    return "a value that is not a version (not shown)"


def _field_problems(gpu_stack: Mapping[str, Any]) -> list[str]:
    problems = []
    for name, (pattern, what) in (FIELDS | OPTIONAL_FIELDS).items():
        if name in OPTIONAL_FIELDS and name not in gpu_stack:
            continue
        value = gpu_stack.get(name)
        if name in OPTIONAL_FIELDS and name not in gpu_stack:
            continue
        if value is None or value == "":
            problems.append(f"gpu_stack.{name} is not set: set it to {what}")
        elif not isinstance(value, str):
            problems.append(f"gpu_stack.{name} is {_shown(value)}, not a string: quote it, e.g. {what}")
        elif "{{" in value or "{%" in value:
            problems.append(
                f"gpu_stack.{name} is a template (not shown): versions are plain strings, set it to {what}"
            )
        elif not re.fullmatch(pattern, value):
            problems.append(f"gpu_stack.{name} is {_shown(value)}: it must be {what}")
    problems += lock_image.field_problems(gpu_stack)
    unknown = sorted(str(key) for key in set(gpu_stack) - set(FIELDS) - set(OPTIONAL_NAMES))
    if unknown:
        names = ", ".join(_shown(key) if not _SHOWN.fullmatch(key) else key for key in unknown)
        problems.append(
            f"gpu_stack has unknown fields {names}: the fields are {', '.join(FIELDS)} "
            f"(optional: {', '.join(OPTIONAL_NAMES)})"
        )
    return problems


def _driver_problems(lock: Mapping[str, str], table: Mapping[str, Any]) -> list[str]:
    problems = []
    flavors = [str(f) for f in table.get("driver_flavors", [])]
    if lock["driver_flavor"] not in flavors:
        problems.append(f"driver_flavor {lock['driver_flavor']} is not one of {', '.join(flavors)}")
    version = lock["driver_version"]
    branch = version.split(".")[0]
    if lock["driver_branch"] != branch:
        problems.append(
            f"driver_branch {lock['driver_branch']} does not fit driver_version {version}: "
            f"set driver_branch to {branch!r}, or pick a version of branch {lock['driver_branch']} "
            f"({_list(v for v in _versions(table, 'drivers') if v.split('.')[0] == lock['driver_branch'])})"
        )
    if version not in _versions(table, "drivers"):
        problems.append(_unlisted("driver_version", version, _versions(table, "drivers")))
    return problems


def _cuda_problems(lock: Mapping[str, str], table: Mapping[str, Any]) -> list[str]:
    cuda, driver = lock["cuda_version"], lock["driver_version"]
    row = _row(table, "cuda", cuda)
    if row is None:
        return [_unlisted("cuda_version", cuda, _versions(table, "cuda"))]
    minimum = str(row["min_driver"])
    if _key(driver) >= _key(minimum):
        return []
    drivers = _newest_per_branch(v for v in _versions(table, "drivers") if _key(v) >= _key(minimum))
    cudas = [str(r["version"]) for r in _rows(table, "cuda") if _key(driver) >= _key(str(r["min_driver"]))]
    return [
        f"driver_version {driver} does not fit cuda_version {cuda}: CUDA {cuda} needs driver >= {minimum}; "
        f"drivers that fit (the newest of each branch): {_list(drivers)}; "
        f"or CUDA versions that fit driver {driver}: {_list(cudas)}"
    ]


def _cudnn_problems(lock: Mapping[str, str], table: Mapping[str, Any]) -> list[str]:
    cudnn, cuda = lock["cudnn_version"], lock["cuda_version"]
    row = _row(table, "cudnn", cudnn)
    if row is None:
        return [_unlisted("cudnn_version", cudnn, _versions(table, "cudnn"))]
    if _fits_range(cuda, row):
        return []
    fitting = [str(r["version"]) for r in _rows(table, "cudnn") if _fits_range(cuda, r)]
    return [
        f"cudnn_version {cudnn} does not fit cuda_version {cuda}: cuDNN {cudnn} supports CUDA "
        f"{row['cuda_min']} to {row['cuda_max']}; "
        f"cuDNN versions that fit CUDA {_minor(cuda)}: {_list(fitting)}"
    ]


def _nccl_problems(lock: Mapping[str, str], table: Mapping[str, Any]) -> list[str]:
    nccl, cuda = lock["nccl_version"], lock["cuda_version"]
    row = _row(table, "nccl", nccl)
    if row is None:
        return [_unlisted("nccl_version", nccl, _versions(table, "nccl"))]
    builds = [str(b) for b in row.get("cuda_builds", [])]
    if _minor(cuda) in builds:
        return []
    fitting = [str(r["version"]) for r in _rows(table, "nccl") if _minor(cuda) in map(str, r["cuda_builds"])]
    return [
        f"nccl_version {nccl} does not fit cuda_version {cuda}: "
        f"NCCL {nccl} is built for CUDA {_list(builds)}; "
        f"NCCL versions built for CUDA {_minor(cuda)}: {_list(fitting)}"
    ]


def _pytorch_problems(lock: Mapping[str, str], table: Mapping[str, Any]) -> list[str]:
    version, tag, cuda = lock["pytorch_version"], lock["pytorch_cuda_tag"], lock["cuda_version"]
    row = _row(table, "pytorch", version)
    if row is None:
        return [_unlisted("pytorch_version", version, _versions(table, "pytorch"))]
    tags = [str(t) for t in row.get("cuda_tags", [])]
    problems = []
    if tag not in tags:
        problems.append(
            f"pytorch_cuda_tag {tag} does not fit pytorch_version {version}: PyTorch {version} publishes "
            f"{_list(tags)}; "
            f"tags that fit CUDA {_minor(cuda)}: {_list(t for t in tags if _tag_fits(t, cuda))}"
        )
    elif not _tag_fits(tag, cuda):
        others = [str(r["version"]) for r in _rows(table, "pytorch") if _tag_fits_any(r, cuda)]
        problems.append(
            f"pytorch_cuda_tag {tag} does not fit cuda_version {cuda}: a {tag} wheel needs CUDA "
            f"{_tag_cuda(tag)} of the same major as the lock and not newer; tags of PyTorch {version} that "
            f"fit: {_list(t for t in tags if _tag_fits(t, cuda))}; PyTorch versions with a fitting tag: "
            f"{_list(others)}"
        )
    return problems


def _horovod_problems(lock: Mapping[str, str], table: Mapping[str, Any]) -> list[str]:
    """Horovod compiles against the locked PyTorch on the host: refuse a pair whose build is known to fail."""
    version = lock.get("horovod_version")
    if version is None:
        return []
    row = _row(table, "horovod", version)
    if row is None:
        return [_unlisted("horovod_version", version, _versions(table, "horovod"))]
    pytorch = lock["pytorch_version"]
    newest, oldest = str(row["pytorch_max"]), str(row["pytorch_min"])
    if _key(oldest) <= _key(_minor(pytorch)) <= _key(newest):
        return []
    fitting = [v for v in _versions(table, "pytorch") if _key(oldest) <= _key(_minor(v)) <= _key(newest)]
    return [
        f"horovod_version {version} does not build against pytorch_version {pytorch}: {row['fails']}; "
        f"the newest PyTorch it builds against is {newest}.x (in the table: {_list(fitting)}): "
        f"lock such a PyTorch, or leave horovod_version out"
    ]


def _toolkit_problems(gpu_stack: Mapping[str, Any], table: Mapping[str, Any]) -> list[str]:
    """A toolkit release the table refuses (`container_toolkit_refused`): what breaks and what to lock."""
    version = gpu_stack.get("container_toolkit_version")
    row = _row(table, "container_toolkit_refused", str(version)) if version else None
    if row is None:
        return []
    why = " ".join(str(row["why"]).split())
    return [
        f"container_toolkit_version {version} is refused: {why}; lock {row['fixed_in']} or later "
        f"(source: {' '.join(str(row['source']).split())})"
    ]


# -- the branch's end of life (a warning, not a conflict) ------------------------------------------------


def warnings(
    gpu_stack: Mapping[str, Any], table: Mapping[str, Any] | None = None, today: datetime.date | None = None
) -> list[str]:
    """One message when the locked driver branch is past its end of life (`driver_branches`), else [].

    A warning, not a conflict: the driver still installs and runs, but NVIDIA ships no more fixes for it.
    It starts on the first day of the end-of-life month. Only a well-formed lock is looked at (`check`
    reports the rest).
    """
    if not isinstance(gpu_stack, Mapping) or _field_problems(gpu_stack):
        return []
    tbl = table if table is not None else load_table()
    day = today or datetime.date.today()
    branch = str(gpu_stack["driver_branch"])
    row = next((r for r in _rows(tbl, "driver_branches") if str(r["branch"]) == branch), None)
    if row is None or day < _first_day(_end_of_life(row)):
        return []
    when = f"{'in' if 'end_of_life' in row else 'by'} {_month_name(_end_of_life(row))}"
    lockable = {v.split(".")[0] for v in _versions(tbl, "drivers")}
    supported = [
        f"{r['branch']} ({r['designation']}, to {_month_name(_end_of_life(r))})"
        for r in _rows(tbl, "driver_branches")
        if "end_of_life" in r and day < _first_day(_end_of_life(r)) and str(r["branch"]) in lockable
    ]
    return [
        f"driver_branch {branch} ({row['designation']} branch) reached its end of life {when}: NVIDIA ships "
        f"it no more fixes; branches in support that a lock can name: {_list(supported)} (dates and sources: "
        "driver_branches in playbooks/vars/gpu_stack_compat.yml)"
    ]


def _end_of_life(row: Mapping[str, Any]) -> str:
    """ "YYYY-MM": the stated month, or the month by which the branch was called end of life."""
    return str(row.get("end_of_life") or row["end_of_life_by"])


def _first_day(month: str) -> datetime.date:
    year, number = (int(part) for part in month.split("-"))
    return datetime.date(year, number, 1)


def _month_name(month: str) -> str:
    day = _first_day(month)
    return f"{calendar.month_name[day.month]} {day.year}"


# -- the OS's repository ---------------------------------------------------------------------------------

# /etc/os-release ID (or Ansible's distribution, lower-cased) -> the family of NVIDIA's repository names.
_REPOSITORY_FAMILY = {
    "ubuntu": "ubuntu",
    "debian": "debian",
    "rocky": "rhel",
    "rhel": "rhel",
    "redhat": "rhel",
    "almalinux": "rhel",
}


def repository_for(os_id: str, version_id: str) -> str:
    """NVIDIA's repository for an OS: ("ubuntu", "24.04") -> "ubuntu2404", ("rocky", "9.4") -> "rhel9".

    "" when the OS is not one NVIDIA's repositories are named for.
    """
    family = _REPOSITORY_FAMILY.get(os_id.strip().lower(), "")
    version = version_id.strip()
    if not family or not re.fullmatch(r"\d+(\.\d+)*", version):
        return ""
    if family == "ubuntu":  # Ubuntu's repositories carry the release: ubuntu2204
        return "ubuntu" + "".join(version.split(".")[:2])
    return family + version.split(".")[0]  # debian12, rhel9: the major only


def os_problems(
    gpu_stack: Mapping[str, Any], os_id: str, version_id: str, table: Mapping[str, Any] | None = None
) -> list[str]:
    """[] when NVIDIA's repository for this OS carries the lock's CUDA, else one message saying what fits.

    Only a lock that `check` accepts is compared (its problems are reported there); an OS that the table
    has no repository for is left to the OS check.
    """
    if not isinstance(gpu_stack, Mapping) or _field_problems(gpu_stack):
        return []
    tbl = table if table is not None else load_table()
    repository = repository_for(os_id, version_id)
    carried = tbl.get("os_repositories", {}).get(repository) if repository else None
    cuda, driver = str(gpu_stack["cuda_version"]), str(gpu_stack["driver_version"])
    if not isinstance(carried, Mapping) or _row(tbl, "cuda", cuda) is None:
        return []
    versions = [str(v) for v in carried.get("cuda", [])]
    if cuda in versions:
        return []
    fitting = [
        v
        for v in versions
        if (row := _row(tbl, "cuda", v)) is not None and _key(driver) >= _key(str(row["min_driver"]))
    ]
    return [
        f"NVIDIA's {repository} repository has no CUDA {cuda}: it carries CUDA {_list(versions)}; "
        f"of those, driver_version {driver} fits {_list(fitting)}. Lock a CUDA it carries (with the cuDNN, "
        "NCCL and PyTorch that fit it), or provision this host with another OS"
    ]


# -- helpers ----------------------------------------------------------------------------------------------


def _rows(table: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    rows = table.get(kind, [])
    return [r for r in rows if isinstance(r, Mapping)]


def _versions(table: Mapping[str, Any], kind: str) -> list[str]:
    return [str(r["version"]) for r in _rows(table, kind)]


def _row(table: Mapping[str, Any], kind: str, version: str) -> Mapping[str, Any] | None:
    return next((r for r in _rows(table, kind) if str(r["version"]) == version), None)


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def _minor(version: str) -> str:
    """ "12.4.1" -> "12.4"."""
    return ".".join(version.split(".")[:2])


def _fits_range(cuda: str, row: Mapping[str, Any]) -> bool:
    return _key(str(row["cuda_min"])) <= _key(_minor(cuda)) <= _key(str(row["cuda_max"]))


def _tag_cuda(tag: str) -> str:
    """ "cu124" -> "12.4", "cu118" -> "11.8", "cu130" -> "13.0"."""
    digits = tag[2:]
    return f"{digits[:-1]}.{digits[-1]}"


def _tag_fits(tag: str, cuda: str) -> bool:
    if tag == "cpu":
        return True
    wheel = _key(_tag_cuda(tag))
    locked = _key(_minor(cuda))
    return wheel[0] == locked[0] and wheel <= locked


def _tag_fits_any(row: Mapping[str, Any], cuda: str) -> bool:
    return any(t != "cpu" and _tag_fits(str(t), cuda) for t in row.get("cuda_tags", []))


def _newest_per_branch(versions: Iterable[str]) -> list[str]:
    """The newest version of each driver branch, oldest branch first."""
    newest: dict[str, str] = {}
    for version in versions:
        branch = version.split(".")[0]
        if branch not in newest or _key(version) > _key(newest[branch]):
            newest[branch] = version
    return [newest[b] for b in sorted(newest, key=int)]


def _list(items: Iterable[str]) -> str:
    values = list(items)
    return ", ".join(values) if values else "none in the table"


def _unlisted(field: str, value: str, listed: list[str]) -> str:
    return f"{field} {value} is not in gpuprov's compatibility table (listed: {_list(listed)}); {HOW_TO_ADD}"
