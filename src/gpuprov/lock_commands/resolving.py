"""The newest lock that fits the table, the constraints, and what every repository really carries.

Pure: the table (gpuprov.lock's), what each OS's repository offers (gpuprov.repo_metadata.Offer, by NVIDIA's
repository name: "debian12"), and the torch wheels of the PyTorch index. The order of preference, each step
among what the ones before it chose:

1. CUDA: the newest row (matching --cuda X.Y) that the table's os_repositories lists for every OS and every
   repository carries, and for which each step below finds something;
2. the driver: at least that CUDA's minimum, of --driver-branch if given, with the flavor's kernel modules in
   every repository; a branch in support (driver_branches: its end of life still ahead) before one past it,
   then the newest;
3. cuDNN: the newest whose CUDA range holds the CUDA, packaged for it in every repository;
4. NCCL: the newest with a build for exactly that CUDA minor in every repository;
5. PyTorch: the newest (matching --torch X.Y) with a cuXYZ wheel that fits the CUDA on the index (the tag of
   the newest CUDA first); the CPU build only where the inventory allows it (python_env_allow_cpu_torch).

Each choice comes with its reason; the CUDA releases passed over come with the first thing that stopped
each, so the way to a newer lock is visible.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuprov.repo_metadata import Offer


@dataclass(frozen=True)
class Wanted:
    driver_branch: str | None = None
    cuda: str | None = None  # "12.4": a CUDA minor
    torch: str | None = None  # "2.5": a PyTorch minor
    flavor: str = "open"
    allow_cpu: bool = False


@dataclass(frozen=True)
class Wheels:
    """The torch wheels the index lists: (version, tag, python) and where they were read."""

    found: frozenset[tuple[str, str, str]]
    where: str


@dataclass
class Resolution:
    lock: dict[str, str]
    reasons: dict[str, str]
    passed_over: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Blocker:
    repository: str | None  # None: no single repository, the combination (or the PyTorch index)
    reason: str


class Unmet(Exception):
    """No lock fits: the blockers of the newest CUDA candidate (per repository where one is to blame)."""

    def __init__(self, blockers: list[Blocker]) -> None:
        super().__init__("; ".join(b.reason for b in blockers))
        self.blockers = blockers


def resolve(
    table: Mapping[str, Any],
    wanted: Wanted,
    offers: Mapping[str, Offer],
    wheels: Wheels,
    today: datetime.date,
) -> Resolution:
    """The newest lock; Unmet when none fits. Its blockers are those of the CUDA release that got furthest
    (every repository carries it, then the driver, cuDNN, NCCL, PyTorch in turn); where no CUDA release is
    in every repository, what each repository carries."""
    candidates = [r for r in _rows(table, "cuda") if _matches(str(r["version"]), wanted.cuda)]
    candidates.sort(key=lambda r: key(str(r["version"])), reverse=True)
    passed_over: list[str] = []
    furthest: tuple[int, list[Blocker]] = (0, [])
    for row in candidates:
        attempt = _try(_Facts(table, offers, wheels, today), wanted, row)
        if isinstance(attempt, Resolution):
            attempt.passed_over = passed_over
            return attempt
        stage, blockers = attempt
        if stage > furthest[0]:
            furthest = (stage, blockers)
        passed_over.append(f"CUDA {row['version']}: {blockers[0].reason}")
    if furthest[1]:
        raise Unmet(furthest[1])
    raise Unmet(_no_common_cuda(table, offers, [str(r["version"]) for r in candidates], wanted.cuda))


def _no_common_cuda(
    table: Mapping[str, Any], offers: Mapping[str, Offer], candidates: list[str], minor: str | None
) -> list[Blocker]:
    matching = f"CUDA {minor} release" if minor else "CUDA release"
    blockers = []
    for repository, offer in offers.items():
        listed = set(map(str, table.get("os_repositories", {}).get(repository, {}).get("cuda", [])))
        own = sorted((v for v in candidates if v in listed and v in offer.cuda), key=key)
        if not own:
            carried = ", ".join(sorted(offer.cuda, key=key)) or "none"
            blockers.append(
                Blocker(
                    repository,
                    f"{repository} carries no {matching} that the table lists for it "
                    f"(the repository has: {carried})",
                )
            )
        else:
            blockers.append(
                Blocker(
                    repository,
                    f"{repository} carries CUDA {', '.join(own)}, which some other OS here does not",
                )
            )
    return blockers


@dataclass(frozen=True)
class _Facts:
    table: Mapping[str, Any]
    offers: Mapping[str, Offer]
    wheels: Wheels
    today: datetime.date


def _try(
    facts: _Facts, wanted: Wanted, cuda_row: Mapping[str, Any]
) -> Resolution | tuple[int, list[Blocker]]:
    """The lock for this CUDA release, or how far it got (1: the driver, 2 cuDNN, 3 NCCL, 4 PyTorch) and
    what stopped it there (0: a repository lacks the CUDA release itself)."""
    table, offers = facts.table, facts.offers
    cuda = str(cuda_row["version"])
    blockers = _cuda_blockers(table, offers, cuda)
    if blockers:
        return 0, blockers
    driver = _driver(table, wanted, offers, cuda_row, facts.today)
    if isinstance(driver, list):
        return 1, driver
    cudnn = _newest(
        "cuDNN",
        [r for r in _rows(table, "cudnn") if _in_range(cuda, r)],
        offers,
        lambda offer, v: offer.has_cudnn(v, cuda),
        f"for CUDA {cuda}",
    )
    if isinstance(cudnn, list):
        return 2, cudnn
    minor = _minor(cuda)
    nccl = _newest(
        "NCCL",
        [r for r in _rows(table, "nccl") if minor in map(str, r.get("cuda_builds", []))],
        offers,
        lambda offer, v: (v, minor) in offer.nccl,
        f"with a +cuda{minor} build",
    )
    if isinstance(nccl, list):
        return 3, nccl
    torch = _torch(table, wanted, facts.wheels, cuda)
    if isinstance(torch, Blocker):
        return 4, [torch]
    return _resolution(wanted, offers, cuda_row, driver, cudnn, nccl, torch)


def _cuda_blockers(table: Mapping[str, Any], offers: Mapping[str, Offer], cuda: str) -> list[Blocker]:
    blockers = []
    for repository, offer in offers.items():
        listed = table.get("os_repositories", {}).get(repository, {}).get("cuda", [])
        if cuda not in map(str, listed):
            blockers.append(
                Blocker(repository, f"the table's os_repositories.{repository} does not list CUDA {cuda}")
            )
        elif cuda not in offer.cuda:
            carried = ", ".join(sorted(offer.cuda, key=key)) or "none"
            blockers.append(
                Blocker(
                    repository,
                    f"{repository} has no cuda-toolkit-{'-'.join(cuda.split('.')[:2])} at {cuda} "
                    f"(its CUDA: {carried})",
                )
            )
    return blockers


@dataclass(frozen=True)
class _Choice:
    version: str
    why: str


def _driver(
    table: Mapping[str, Any],
    wanted: Wanted,
    offers: Mapping[str, Offer],
    cuda_row: Mapping[str, Any],
    today: datetime.date,
) -> _Choice | list[Blocker]:
    minimum = str(cuda_row["min_driver"])
    rows = [
        r
        for r in _rows(table, "drivers")
        if key(str(r["version"])) >= key(minimum)
        and (wanted.driver_branch is None or str(r["version"]).split(".")[0] == wanted.driver_branch)
    ]
    supported = {b for b, end in _branch_ends(table).items() if end is not None and today < end}
    rows.sort(
        key=lambda r: (str(r["version"]).split(".")[0] in supported, key(str(r["version"]))), reverse=True
    )
    branch_words = f"of branch {wanted.driver_branch} " if wanted.driver_branch else ""
    words = (
        f"{branch_words}>= {minimum} (CUDA {cuda_row['version']}'s minimum) "
        f"with {wanted.flavor} kernel modules"
    )
    chosen = _newest(
        "driver",
        rows,
        offers,
        lambda offer, v: wanted.flavor in offer.drivers.get(v, set()),
        words,
        in_order=True,
    )
    if isinstance(chosen, list):
        return chosen
    branch = chosen.version.split(".")[0]
    life = (
        "a branch in support"
        if branch in supported
        else "no branch in support offers one (this one is past its end of life: see the warning)"
    )
    return _Choice(chosen.version, f"{chosen.why}; {life}")


def _branch_ends(table: Mapping[str, Any]) -> dict[str, datetime.date | None]:
    """Branch -> the first day of its stated end-of-life month (None: only 'end of life by' is known)."""
    ends: dict[str, datetime.date | None] = {}
    for row in _rows(table, "driver_branches"):
        stated = row.get("end_of_life")
        year, month = (int(p) for p in str(stated).split("-")) if stated else (0, 0)
        ends[str(row["branch"])] = datetime.date(year, month, 1) if stated else None
    return ends


def _newest(
    what: str,
    rows: Sequence[Mapping[str, Any]],
    offers: Mapping[str, Offer],
    has: Callable[[Offer, str], bool],
    words: str,
    *,
    in_order: bool = False,
) -> _Choice | list[Blocker]:
    """The newest of rows (or the first, in_order: rows in preference order) every repository carries."""
    versions = [str(r["version"]) for r in rows]
    if not in_order:
        versions.sort(key=key, reverse=True)
    if not versions:
        return [Blocker(None, f"the table lists no {what} {words}")]
    for version in versions:
        if all(has(offer, version) for offer in offers.values()):
            return _Choice(version, f"the newest {what} in the table {words} that every repository carries")
    blockers = []
    for repository, offer in offers.items():
        own = [v for v in versions if has(offer, v)]
        if not own:
            blockers.append(Blocker(repository, f"{repository} has no {what} {words} that the table lists"))
    if not blockers:
        shown = "; ".join(f"{r}: {', '.join(v for v in versions if has(o, v))}" for r, o in offers.items())
        blockers.append(Blocker(None, f"no {what} {words} is in every repository ({shown})"))
    return blockers


def _torch(table: Mapping[str, Any], wanted: Wanted, wheels: Wheels, cuda: str) -> _Choice | Blocker:
    rows = [r for r in _rows(table, "pytorch") if _matches(str(r["version"]), wanted.torch)]
    rows.sort(key=lambda r: key(str(r["version"])), reverse=True)
    on_index: dict[tuple[str, str], list[str]] = {(v, t): [] for v, t, _ in wheels.found}
    for v, t, python in wheels.found:
        on_index[(v, t)].append(python)
    for row in rows:
        version = str(row["version"])
        tags = sorted(
            (str(t) for t in row.get("cuda_tags", []) if _tag_fits(str(t), cuda)), key=key, reverse=True
        )
        for tag in [t for t in tags if t != "cpu"] + (["cpu"] if wanted.allow_cpu and "cpu" in tags else []):
            if (version, tag) in on_index:
                pythons = ", ".join(sorted(set(on_index[(version, tag)]), key=key))
                cpu = (
                    "; the CPU build: python_env_allow_cpu_torch is set and no CUDA build fits"
                    if tag == "cpu"
                    else ""
                )
                return _Choice(f"{version} {tag}", f"wheels for {pythons} on {wheels.where}{cpu}")
    needed = f"a cuXYZ wheel of CUDA {_minor(cuda)} or older (major {cuda.split('.')[0]})"
    listed = ", ".join(sorted({f"{v}+{t}" for v, t, _ in wheels.found if t}, key=key)[-8:]) or "none"
    return Blocker(
        None, f"{wheels.where} has no torch {needed} of a PyTorch the table lists (it has: {listed})"
    )


def _resolution(
    wanted: Wanted,
    offers: Mapping[str, Offer],
    cuda_row: Mapping[str, Any],
    driver: _Choice,
    cudnn: _Choice,
    nccl: _Choice,
    torch: _Choice,
) -> Resolution:
    cuda = str(cuda_row["version"])
    repositories = ", ".join(sorted(offers))
    torch_version, tag = torch.version.split(" ")
    lock = {
        "driver_branch": driver.version.split(".")[0],
        "driver_version": driver.version,
        "driver_flavor": wanted.flavor,
        "cuda_version": cuda,
        "cudnn_version": cudnn.version,
        "nccl_version": nccl.version,
        "pytorch_version": torch_version,
        "pytorch_cuda_tag": tag,
    }
    constraint = f" matching --cuda {wanted.cuda}" if wanted.cuda else ""
    reasons = {
        "driver_branch": f"driver_version's branch{' (--driver-branch)' if wanted.driver_branch else ''}",
        "driver_version": driver.why,
        "driver_flavor": "--driver-flavor"
        if wanted.flavor != "open"
        else "the default (--driver-flavor open)",
        "cuda_version": f"the newest CUDA in the table{constraint} that every repository ({repositories}) "
        "carries and the table lists for its OS, with a driver, cuDNN, NCCL and PyTorch that fit",
        "cudnn_version": cudnn.why,
        "nccl_version": nccl.why,
        "pytorch_version": "the newest PyTorch in the table"
        + (f" matching --torch {wanted.torch}" if wanted.torch else "")
        + f" with a wheel that fits CUDA {cuda}",
        "pytorch_cuda_tag": torch.why,
    }
    return Resolution(lock, reasons)


def unlisted(table: Mapping[str, Any], offers: Mapping[str, Offer]) -> list[str]:
    """Drivers and CUDA releases a repository carries that are newer than every row of their kind in the
    table: the table is behind (a lock cannot name them until they get their row, with a source)."""
    lines = []
    for repository, offer in sorted(offers.items()):
        for kind, carried in (("drivers", set(offer.drivers)), ("cuda", offer.cuda)):
            listed = [str(r["version"]) for r in _rows(table, kind)]
            newest = max(listed, key=key) if listed else ""
            newer = sorted((v for v in carried if key(v) > key(newest)), key=key)
            if newer:
                what = "driver" if kind == "drivers" else "CUDA"
                lines.append(
                    f"{repository} carries {what} {', '.join(newer)}, newer than the table's {newest}"
                )
    return lines


# -- helpers ------------------------------------------------------------------------------------------------


def _rows(table: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    return [r for r in table.get(kind, []) if isinstance(r, Mapping)]


def key(version: str) -> tuple[int, ...]:
    """A version's numbers, for ordering ("cp311" -> (311,), "cu126" -> (126,))."""
    return tuple(int(part) for part in re.findall(r"\d+", version))


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _matches(version: str, minor: str | None) -> bool:
    return minor is None or _minor(version) == minor


def _in_range(cuda: str, row: Mapping[str, Any]) -> bool:
    return key(str(row["cuda_min"])) <= key(_minor(cuda)) <= key(str(row["cuda_max"]))


def _tag_fits(tag: str, cuda: str) -> bool:
    """As gpuprov.lock: "cpu" always; a cuXYZ wheel of the lock's CUDA major and not newer."""
    if tag == "cpu":
        return True
    digits = tag[2:]
    wheel = (int(digits[:-1]), int(digits[-1]))
    locked = key(_minor(cuda))
    return wheel[0] == locked[0] and wheel <= locked
