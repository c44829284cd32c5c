import datetime
from pathlib import Path

import pytest
import yaml

from gpuprov import lock, resources
from gpuprov.sandbox.inventory import SANDBOX_LOCK

SAMPLE_LOCK = resources.data_dir("inventory") / "sample" / "group_vars" / "all" / "gpu_stack.yml"

# The lock the sandbox writes beside its inventory: every package of it exists on the sandbox mirror.


def with_(**changes: str) -> dict[str, str]:
    return {**SANDBOX_LOCK, **changes}


def test_the_shipped_table_loads_and_every_row_is_well_formed():
    table = lock.load_table()
    assert lock.table_path().is_file()
    for kind in ("drivers", "cuda", "cudnn", "nccl", "pytorch"):
        rows = table[kind]
        assert rows, kind
        for row in rows:
            assert isinstance(row["version"], str) and row["source"], row
    drivers = [d["version"] for d in table["drivers"]]
    for row in table["cuda"]:
        assert row["min_driver"] in drivers, row  # the minimum itself is a driver one can lock


def test_sample_and_sandbox_locks_fit():
    sample = yaml.safe_load(SAMPLE_LOCK.read_text())["gpu_stack"]
    assert lock.check(sample) == []
    assert lock.check(SANDBOX_LOCK) == []


def test_every_cuda_in_the_table_has_a_fitting_driver_nccl_cudnn_and_pytorch():
    table = lock.load_table()
    for cuda in table["cuda"]:
        minor = ".".join(cuda["version"].split(".")[:2])
        driver = cuda["min_driver"]
        nccl = next(n["version"] for n in table["nccl"] if minor in n["cuda_builds"])
        cudnn = next(c["version"] for c in table["cudnn"] if lock._fits_range(cuda["version"], c))
        pytorch, tag = next(
            (p["version"], t)
            for p in table["pytorch"]
            for t in p["cuda_tags"]
            if t != "cpu" and lock._tag_fits(t, minor)
        )
        stack = with_(
            cuda_version=cuda["version"],
            driver_version=driver,
            driver_branch=driver.split(".")[0],
            nccl_version=nccl,
            cudnn_version=cudnn,
            pytorch_version=pytorch,
            pytorch_cuda_tag=tag,
        )
        assert lock.check(stack) == [], cuda


def test_every_os_repository_lists_table_cuda_rows_with_a_source():
    table = lock.load_table()
    cudas = [c["version"] for c in table["cuda"]]
    repositories = table["os_repositories"]
    # The OS releases the NVIDIA roles support, by NVIDIA's repository names.
    assert sorted(repositories) == ["debian12", "rhel8", "rhel9", "ubuntu2004", "ubuntu2204", "ubuntu2404"]
    for name, row in repositories.items():
        assert row["source"], name
        assert row["cuda"] and set(row["cuda"]) <= set(cudas), name
    for cuda in cudas:  # every CUDA row installs somewhere
        assert any(cuda in row["cuda"] for row in repositories.values()), cuda


@pytest.mark.parametrize(
    ("os_id", "version", "repository"),
    [
        ("ubuntu", "24.04", "ubuntu2404"),
        ("Ubuntu", "20.04", "ubuntu2004"),
        ("debian", "12", "debian12"),
        ("Debian", "12.7", "debian12"),  # Ansible's distribution_version on Debian
        ("rocky", "9.4", "rhel9"),
        ("RedHat", "8.10", "rhel8"),
        ("rhel", "9", "rhel9"),
        ("arch", "", ""),
        ("ubuntu", "", ""),
    ],
)
def test_repository_for(os_id: str, version: str, repository: str):
    assert lock.repository_for(os_id, version) == repository


def test_os_repository_without_the_locked_cuda_names_what_fits():
    sample = yaml.safe_load(SAMPLE_LOCK.read_text())["gpu_stack"]
    assert lock.os_problems(sample, "ubuntu", "24.04") == [
        "NVIDIA's ubuntu2404 repository has no CUDA 12.4.1: it carries CUDA 12.6.3, 12.8.1, 12.9.1, 13.0.0, "
        "13.0.1, 13.0.2, 13.0.3, 13.1.1, 13.2.0, 13.2.1, 13.3.1; of those, driver_version 580.126.09 fits "
        "12.6.3, 12.8.1, 12.9.1, 13.0.0, 13.0.1, 13.0.2. Lock a CUDA it carries "
        "(with the cuDNN, NCCL and PyTorch that fit it), or provision this host with another OS"
    ]
    newer = with_(driver_branch="570", driver_version="570.124.06")
    assert "driver_version 570.124.06 fits 12.6.3, 12.8.1." in lock.os_problems(newer, "ubuntu", "24.04")[0]
    # CUDA 13 is not in Ubuntu 20.04's repository (CUDA 13.0 dropped Ubuntu 20.04).
    cuda13 = with_(driver_branch="580", driver_version="580.95.05", cuda_version="13.0.2")
    assert lock.os_problems(cuda13, "ubuntu", "20.04")[0].startswith(
        "NVIDIA's ubuntu2004 repository has no CUDA 13.0.2"
    )
    assert lock.os_problems(cuda13, "ubuntu", "22.04") == []
    # NVIDIA's debian12 repository starts at CUDA 12.3 (its listing's first cuda-12-3 package), so no 12.2.2.
    cuda122 = with_(driver_branch="535", driver_version="535.216.03", cuda_version="12.2.2")
    assert lock.os_problems(cuda122, "debian", "12")[0].startswith(
        "NVIDIA's debian12 repository has no CUDA 12.2.2"
    )
    assert lock.os_problems(cuda122, "rocky", "9.4") == []


def test_os_check_leaves_other_problems_to_their_checks():
    sample = yaml.safe_load(SAMPLE_LOCK.read_text())["gpu_stack"]
    for os_id, version in [("debian", "12"), ("ubuntu", "22.04"), ("rocky", "9.4"), ("rhel", "8.10")]:
        assert lock.os_problems(sample, os_id, version) == [], os_id
    assert lock.os_problems(sample, "arch", "rolling") == []  # an unsupported OS: the OS check says so
    assert lock.os_problems(with_(cuda_version="12"), "ubuntu", "24.04") == []  # malformed: check() says so
    assert lock.os_problems(with_(cuda_version="12.5.1"), "ubuntu", "24.04") == []  # not in the table


def test_driver_too_old_for_cuda_names_the_pair_and_what_fits():
    problems = lock.check(with_(driver_branch="535", driver_version="535.216.03"))
    assert len(problems) == 1
    message = problems[0]
    assert message.startswith("driver_version 535.216.03 does not fit cuda_version 12.4.1")
    assert "needs driver >= 550.54.15" in message
    # One driver per branch, the newest: the table lists dozens of fitting releases.
    assert (
        "drivers that fit (the newest of each branch): 550.163.01, 560.35.05, 565.57.01, 570.211.01, "
        "575.57.08, 580.178.04, 590.48.01, 595.91.07, 610.57.04;" in message
    )
    assert "CUDA versions that fit driver 535.216.03: 12.2.2" in message


def test_branch_must_match_the_version():
    problems = lock.check(with_(driver_branch="570"))
    assert problems == [
        "driver_branch 570 does not fit driver_version 580.126.09: set driver_branch to '580', or pick a "
        "version of branch 570 (570.86.15, 570.124.06, 570.133.20, 570.148.08, 570.158.01, 570.172.08, "
        "570.195.03, 570.211.01)"
    ]


def test_nccl_built_for_another_cuda():
    problems = lock.check(with_(nccl_version="2.26.2"))
    assert problems == [
        "nccl_version 2.26.2 does not fit cuda_version 12.4.1: NCCL 2.26.2 is built for CUDA 12.8; "
        "NCCL versions built for CUDA 12.4: 2.21.5"
    ]


def test_cudnn_outside_its_cuda_range():
    stack = with_(
        cuda_version="12.8.1",
        driver_branch="570",
        driver_version="570.124.06",
        nccl_version="2.26.2",
        cudnn_version="9.5.1.17",
    )
    assert lock.check(stack) == [
        "cudnn_version 9.5.1.17 does not fit cuda_version 12.8.1: cuDNN 9.5.1.17 supports CUDA 12.0 to "
        "12.6; cuDNN versions that fit CUDA 12.8: 9.10.2.21, 9.15.0.58, 9.17.1.4, 9.19.0.56, 9.20.0.48, "
        "9.24.0.43"
    ]


def test_pytorch_tag_not_published_and_tag_newer_than_cuda():
    assert lock.check(with_(pytorch_version="2.5.1", pytorch_cuda_tag="cu126")) == [
        "pytorch_cuda_tag cu126 does not fit pytorch_version 2.5.1: PyTorch 2.5.1 publishes cpu, cu118, "
        "cu121, cu124; tags that fit CUDA 12.4: cpu, cu121, cu124"
    ]
    problems = lock.check(with_(pytorch_version="2.7.1", pytorch_cuda_tag="cu128"))
    assert len(problems) == 1
    assert problems[0].startswith("pytorch_cuda_tag cu128 does not fit cuda_version 12.4.1")
    assert "tags of PyTorch 2.7.1 that fit: cpu" in problems[0]
    assert "PyTorch versions with a fitting tag: 2.4.1, 2.5.1, 2.6.0" in problems[0]
    # cu118 wheels need CUDA 11: another major than the lock's CUDA 12.
    assert lock.check(with_(pytorch_version="2.5.1", pytorch_cuda_tag="cu118"))[0].startswith(
        "pytorch_cuda_tag cu118 does not fit cuda_version 12.4.1"
    )


def test_versions_outside_the_table_say_how_to_add_one():
    problems = lock.check(with_(cuda_version="12.5.1"))
    assert problems[0] == (
        "cuda_version 12.5.1 is not in gpuprov's compatibility table (listed: 12.2.2, 12.4.1, 12.6.3, "
        f"12.8.1, 12.9.1, 13.0.0, 13.0.1, 13.0.2, 13.0.3, 13.1.1, 13.2.0, 13.2.1, 13.2.2, 13.3.1); "
        f"{lock.HOW_TO_ADD}"
    )
    # The other pairs are still compared: no NCCL in the table is built for CUDA 12.5.
    assert problems[1:] == [
        "nccl_version 2.21.5 does not fit cuda_version 12.5.1: NCCL 2.21.5 is built for CUDA 12.4; "
        "NCCL versions built for CUDA 12.5: none in the table"
    ]


def test_malformed_fields_are_reported_before_pairs():
    problems = lock.check({**SANDBOX_LOCK, "driver_branch": 550, "cuda_version": "12", "extra": "x"})
    missing = {k: v for k, v in SANDBOX_LOCK.items() if k != "nccl_version"}
    assert problems == [
        'gpu_stack.driver_branch is 550, not a string: quote it, e.g. a driver branch such as "550"',
        "gpu_stack.cuda_version is '12': it must be a CUDA version such as \"12.4.1\"",
        "gpu_stack has unknown fields extra: the fields are "
        + ", ".join(lock.FIELDS)
        + f" (optional: {', '.join(lock.OPTIONAL_NAMES)})",
    ]
    assert lock.check(missing) == [
        'gpu_stack.nccl_version is not set: set it to an NCCL version such as "2.21.5"'
    ]
    assert lock.check("550") == [  # type: ignore[arg-type]
        f"gpu_stack must be a mapping of {', '.join(lock.FIELDS)}; got str"
    ]


def test_flavor_must_be_open_or_proprietary():
    assert lock.check(with_(driver_flavor="closed")) == [
        'gpu_stack.driver_flavor is \'closed\': it must be "open" or "proprietary"'
    ]


def test_a_table_file_without_the_key_is_refused(tmp_path: Path):
    bad = tmp_path / "t.yml"
    bad.write_text("other: 1\n")
    with pytest.raises(ValueError, match="no 'gpu_stack_compat' mapping"):
        lock.load_table(bad)


def test_openmpi_version_is_optional_but_checked_when_given():
    without = {k: v for k, v in SANDBOX_LOCK.items() if k != "openmpi_version"}
    assert lock.check(without) == []
    assert lock.check({**SANDBOX_LOCK, "openmpi_version": "4.1.4"}) == [
        "gpu_stack.openmpi_version is '4.1.4': it must be an Open MPI release series such as \"4.1\""
    ]
    assert lock.check({**SANDBOX_LOCK, "openmpi_version": ""}) == [
        'gpu_stack.openmpi_version is not set: set it to an Open MPI release series such as "4.1"'
    ]


def test_a_refused_toolkit_release_names_what_breaks_and_what_to_lock():
    problems = lock.check(with_(container_toolkit_version="1.18.1"))
    assert len(problems) == 1
    assert problems[0].startswith(
        "container_toolkit_version 1.18.1 is refused: its nvidia-cdi-refresh.service runs only when "
        "modules.dep names nvidia.ko followed by ':', so it skips compressed modules"
    )
    assert (
        "lock 1.18.2 or later (source: github.com/NVIDIA/nvidia-container-toolkit commit 5172ba91"
        in problems[0]
    )
    assert lock.check(with_(container_toolkit_version="1.18.2")) == []
    assert lock.check(with_(container_toolkit_version="1.18.0")) == []
    for row in lock.load_table()["container_toolkit_refused"]:
        assert row["why"] and row["fixed_in"] and row["source"], row


# -- the driver branches' end of life ----------------------------------------------------------------------

R580 = {"driver_branch": "580", "driver_version": "580.178.04", "cuda_version": "13.0.2"}


def test_every_driver_branch_has_a_sourced_end_of_life_and_every_driver_a_branch_row():
    table = lock.load_table()
    rows = {row["branch"]: row for row in table["driver_branches"]}
    for row in rows.values():
        assert row["source"] and row["designation"] in {"long-term support", "production", "new feature"}
        month = row.get("end_of_life") or row["end_of_life_by"]
        assert lock._first_day(month).day == 1, row
    assert {d["version"].split(".")[0] for d in table["drivers"]} <= set(rows)


@pytest.mark.parametrize(
    ("day", "warned"),
    [
        (datetime.date(2026, 5, 31), False),
        (datetime.date(2026, 6, 1), True),
        (datetime.date(2027, 1, 1), True),
    ],
)
def test_a_branch_past_its_end_of_life_warns_from_the_first_day_of_that_month(
    day: datetime.date, warned: bool
):
    stack = with_(
        driver_branch="535", driver_version="535.216.03", cuda_version="12.2.2", nccl_version="2.19.3"
    )
    assert lock.check(stack) == []  # a warning is not a conflict: the lock still fits
    messages = lock.warnings(stack, today=day)
    assert bool(messages) is warned
    if warned:
        assert messages[0].startswith(
            "driver_branch 535 (long-term support branch) reached its end of life in June 2026: NVIDIA "
            "ships it no more fixes; branches in support that a lock can name: 580 (long-term support, to "
            "June 2028)"
        )


def test_a_branch_known_end_of_life_only_by_a_month_says_by_and_names_what_is_supported():
    r550 = {**SANDBOX_LOCK, "driver_branch": "550", "driver_version": "550.127.08"}
    (message,) = lock.warnings(r550, today=datetime.date(2026, 11, 26))
    assert message == (
        "driver_branch 550 (production branch) reached its end of life by July 2025: NVIDIA ships it no more "
        "fixes; branches in support that a lock can name: 580 (long-term support, to June 2028), 595 "
        "(production, to March 2027) (dates and sources: driver_branches in "
        "playbooks/vars/gpu_stack_compat.yml)"
    )


def test_a_supported_branch_and_a_malformed_or_unknown_lock_do_not_warn():
    assert lock.warnings(with_(**R580), today=datetime.date(2026, 11, 26)) == []
    assert lock.warnings(with_(**R580), today=datetime.date(2028, 6, 1)) != []
    malformed = with_(driver_branch="55")  # check() reports it
    assert lock.warnings(malformed, today=datetime.date(2026, 11, 26)) == []
    table = {**lock.load_table(), "driver_branches": []}
    r550 = {**SANDBOX_LOCK, "driver_branch": "550", "driver_version": "550.127.08"}
    assert lock.warnings(r550, table, today=datetime.date(2026, 11, 26)) == []


def test_the_sandbox_and_sample_locks_name_a_branch_in_support():
    sample = yaml.safe_load(SAMPLE_LOCK.read_text())["gpu_stack"]
    for stack in (SANDBOX_LOCK, sample):
        assert lock.check(stack) == []
        assert lock.warnings(stack, today=datetime.date(2026, 11, 26)) == []
