"""The lock's optional container image: its rows, and what the check refuses (gpuprov/lock_image.py)."""

from __future__ import annotations

import re

import pytest

from gpuprov import lock, lock_image
from gpuprov.sandbox.inventory import SANDBOX_LOCK

DIGEST = "sha256:" + "0123456789abcdef" * 4
NGC = "nvcr.io/nvidia/pytorch"


# The driver these tests lock: R550, older than the images below need (the sandbox lock's R580 runs them all,
# 25.12 through CUDA forward compatibility).
R550 = {"driver_branch": "550", "driver_version": "550.127.08"}


def stack(image: object, cuda: object = None, **changes: str) -> dict[str, object]:
    result: dict[str, object] = {**SANDBOX_LOCK, **R550, **changes, "container_image": image}
    if cuda is not None:
        result["container_image_cuda"] = cuda
    return result


def test_every_ngc_row_is_well_formed_and_sourced():
    table = lock.load_table()
    rows = table[lock_image.NGC_KEY]
    assert [r["release"] for r in rows] == sorted(r["release"] for r in rows)
    for row in rows:
        # Every row names the release's own notes page; a copy elsewhere is marked as secondary.
        page = "https://docs.nvidia.com/deeplearning/frameworks/pytorch-release-notes/rel-"
        assert page + row["release"].replace(".", "-") + ".html" in row["source"], row
        assert lock_image._CUDA.fullmatch(row["cuda"]) and row["cuda"] != "cpu", row
        assert re.fullmatch(r"\d{3}(\.\d+)*", row["min_driver"]), row
        branch_of_minimum = int(row["min_driver"].split(".")[0])
        for branch, minimum in row["forward_compatible"].items():
            assert minimum.split(".")[0] == branch and int(branch) <= branch_of_minimum, row


def test_no_ngc_row_asks_less_than_full_support_of_its_cuda_where_the_table_knows_it():
    """The same rule as for an own image's container_image_cuda: the `cuda` row's minimum (docs/lock.md)."""
    table = lock.load_table()
    cuda_minimum = {r["version"]: r["min_driver"] for r in table["cuda"]}
    for row in table[lock_image.NGC_KEY]:
        if row["cuda"] in cuda_minimum:
            assert lock_image._key(row["min_driver"]) >= lock_image._key(cuda_minimum[row["cuda"]]), row


def test_a_lock_without_an_image_is_unchanged():
    assert lock.check(SANDBOX_LOCK) == []


def test_an_ngc_release_the_locked_driver_runs_fits():
    assert lock.check(stack(f"{NGC}:24.06-py3@{DIGEST}")) == []


def test_an_ngc_release_that_needs_a_newer_driver_is_refused_in_one_line_naming_what_fits():
    problems = lock.check(stack(f"{NGC}:24.10-py3@{DIGEST}"))
    assert problems == [
        "driver_version 550.127.08 cannot run NGC PyTorch 24.10 (CUDA 12.6.2): it needs driver 560 or later "
        "(branch R560 or newer); NGC PyTorch releases that run on 550.127.08: 24.06"
    ]


# Whole locks the table accepts on their own, so that only the image can make them fail.
R570 = {"driver_branch": "570", "driver_version": "570.124.06", "cuda_version": "12.8.1"}
R570 |= {"cudnn_version": "9.10.2.21", "nccl_version": "2.26.2"}
R580 = {"driver_branch": "580", "driver_version": "580.95.05", "cuda_version": "13.0.2"}
R580 |= {"cudnn_version": "9.15.0.58", "nccl_version": "2.27.7"}


def test_25_03_runs_on_the_r570_driver_of_its_cuda():
    assert lock.check(stack(f"{NGC}:25.03-py3@{DIGEST}", **R570)) == []


def test_25_03_is_refused_on_r560_naming_the_driver_and_branch_it_needs():
    on_560 = {
        "driver_branch": "560",
        "driver_version": "560.35.05",
        "cuda_version": "12.6.3",
        "nccl_version": "2.23.4",
    }
    (problem,) = lock.check(stack(f"{NGC}:25.03-py3@{DIGEST}", **on_560))
    assert problem == (
        "driver_version 560.35.05 cannot run NGC PyTorch 25.03 (CUDA 12.8.1): it needs driver 570.124.06 or "
        "later (branch R570 or newer); NGC PyTorch releases that run on 560.35.05: 24.06, 24.10"
    )


def test_25_08_needs_r580_and_r570_is_not_enough():
    image = f"{NGC}:25.08-py3@{DIGEST}"
    assert lock.check(stack(image, **R580)) == []
    (problem,) = lock.check(stack(image, **R570))
    assert "cannot run NGC PyTorch 25.08 (CUDA 13.0.0): it needs driver 580.65.06 or later" in problem
    assert problem.endswith("NGC PyTorch releases that run on 570.124.06: 24.06, 24.10, 25.03")


def test_25_12_runs_on_r580_only_as_nvidia_s_stated_data_center_compatibility():
    image = f"{NGC}:25.12-py3@{DIGEST}"
    assert lock.check(stack(image, **R580)) == []
    (problem,) = lock.check(stack(image, **R570))
    assert problem == (
        "driver_version 570.124.06 cannot run NGC PyTorch 25.12 (CUDA 13.1.0): it needs driver 590.44.01 or "
        "later (branch R590 or newer), or on data-center GPUs 580.65.06 (or later R580), as NVIDIA states "
        "for this release; NGC PyTorch releases that run on 570.124.06: 24.06, 24.10, 25.03"
    )


def test_forward_compatibility_lets_an_older_data_center_branch_run_a_newer_image():
    row = {"release": "24.05", "cuda": "12.4.1", "min_driver": "545", "forward_compatible": {"535": "535.86"}}
    assert lock_image.runs_on(row, "535.216.03")
    assert not lock_image.runs_on(row, "535.54.03")  # older than the stated 535.86
    assert not lock_image.runs_on(row, "530.30.02")  # a branch that is not listed
    assert lock_image.runs_on(row, "550.127.08")


def test_forward_compatibility_is_what_lets_the_table_s_r535_drivers_run_24_06():
    image = f"{NGC}:24.06-py3@{DIGEST}"
    on_535 = stack(image, driver_branch="535", driver_version="535.104.05", cuda_version="12.2.2")
    on_535 |= {"cudnn_version": "8.9.7.29", "nccl_version": "2.19.3", "pytorch_version": "2.5.1"}
    assert lock.check(on_535) == []


def test_the_forward_compatible_branches_are_named_when_refused():
    table = {
        "ngc_pytorch": [
            {
                "release": "24.05",
                "cuda": "12.4.1",
                "min_driver": "545",
                "forward_compatible": {"535": "535.86"},
            }
        ]
    }
    problems = lock_image.driver_problems(
        stack(f"{NGC}:24.05-py3@{DIGEST}", driver_version="535.54.03"), table
    )
    assert problems == [
        "driver_version 535.54.03 cannot run NGC PyTorch 24.05 (CUDA 12.4.1): it needs driver 545 or later "
        "(branch R545 or newer), or on data-center GPUs 535.86 (or later R535), as NVIDIA states for this "
        "release; NGC PyTorch releases that run on 535.54.03: none in the table"
    ]


def test_an_unlisted_ngc_release_is_refused_with_the_listed_ones():
    (problem,) = lock.check(stack(f"{NGC}:25.01-py3@{DIGEST}"))
    assert problem.startswith("container_image is NGC PyTorch 25.01, which gpuprov's table does not list")
    assert "(listed: 24.06, 24.10, 25.03, 25.08, 25.12)" in problem


@pytest.mark.parametrize("image", [f"{NGC}:25.01-py3", "registry.example:5000/team/train:v3", "team/train"])
def test_a_tag_without_a_digest_is_refused(image: str):
    (problem,) = lock.check(stack(image, cuda="cpu"))
    assert f"gpu_stack.container_image {image} has a tag but no digest" in problem
    assert "append @sha256:<digest>" in problem


@pytest.mark.parametrize(
    "image",
    [f"{NGC}:25.01-py3@sha256:abc", f"{NGC}@md5:{'0' * 32}", f"{NGC}@sha256:{'A' * 64}"],
)
def test_a_digest_that_is_not_sha256_is_refused(image: str):
    (problem,) = lock.check(stack(image, cuda="cpu"))
    assert "digest is not sha256:<64 lower-case hex digits>" in problem


@pytest.mark.parametrize(
    "image", ["team/UPPER@" + DIGEST, "has space", "{{ lookup('env', 'X') }}", 42, ["x"]]
)
def test_what_is_not_a_reference_is_refused_and_not_echoed_unless_it_looks_like_one(image: object):
    (problem,) = lock.check(stack(image, cuda="cpu"))
    assert problem.startswith("gpu_stack.container_image is "), problem
    assert "lookup" not in problem and "has space" not in problem


def test_an_own_image_needs_its_cuda_stated():
    (problem,) = lock.check(stack(f"registry.example:5000/team/train@{DIGEST}"))
    assert "cannot look up its CUDA: set container_image_cuda" in problem


def test_an_own_image_is_checked_against_its_stated_cuda():
    image = f"registry.example:5000/team/train:v3@{DIGEST}"
    assert lock.check(stack(image, cuda="12.4.1")) == []
    assert lock.check(stack(image, cuda="cpu")) == []
    (problem,) = lock.check(stack(image, cuda="12.8.1"))
    assert problem == (
        "driver_version 550.127.08 cannot run container_image: its CUDA 12.8.1 needs driver >= 570.124.06; "
        "lock a newer driver or an image built on an older CUDA"
    )
    (unlisted,) = lock.check(stack(image, cuda="12.5.0"))
    assert "container_image_cuda 12.5.0 is not in gpuprov's compatibility table" in unlisted


def test_a_stated_cuda_that_contradicts_the_ngc_row_is_refused():
    (problem,) = lock.check(stack(f"{NGC}:24.06-py3@{DIGEST}", cuda="12.4.1"))
    assert "contradicts NGC PyTorch 24.06, which is built on CUDA 12.5.0" in problem


@pytest.mark.parametrize("cuda", ["12.4", 12.4, "cu124"])
def test_a_malformed_image_cuda_is_refused(cuda: object):
    (problem,) = lock.check(stack(f"registry.example/team/train@{DIGEST}", cuda=cuda))
    assert problem.startswith("gpu_stack.container_image_cuda is ")


def test_an_image_cuda_without_an_image_is_refused():
    bare = {**SANDBOX_LOCK, "container_image_cuda": "12.4.1"}
    assert lock.check(bare) == [
        "gpu_stack.container_image_cuda is set without container_image: set both, or neither"
    ]


def test_the_reference_grammar_accepts_what_registries_serve():
    for ref in (
        f"{NGC}:24.05-py3@{DIGEST}",
        f"172.18.0.3:5000/gpuprov/pytorch-cpu:2.13.0@{DIGEST}",
        f"localhost/a__b/c-d.e@{DIGEST}",
        f"ghcr.io/org/repo@{DIGEST}",
    ):
        assert lock_image.field_problems({"container_image": ref, "container_image_cuda": "cpu"}) == [], ref


def test_plain_ansible_playbook_runs_refuse_the_same_through_the_filter_plugin():
    """validate_inventory_and_lock.yml's first play: one line per problem, naming the hosts with that lock."""
    import importlib.util

    from gpuprov import resources

    plugin = resources.data_dir("playbooks") / "filter_plugins" / "gpu_stack.py"
    spec = importlib.util.spec_from_file_location("gpu_stack_filter_for_images", plugin)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    conflicts = module.FilterModule().filters()["gpu_stack_conflicts"]
    tagged = stack(f"{NGC}:24.05-py3")
    too_new = stack(f"{NGC}:24.10-py3@{DIGEST}")
    messages = conflicts({"node1": tagged, "node2": tagged, "node3": too_new}, lock.load_table())
    assert len(messages) == 2
    assert messages[0].startswith(
        f"node1, node2: gpu_stack.container_image {NGC}:24.05-py3 has a tag but no digest"
    )
    assert messages[1].startswith("node3: driver_version 550.127.08 cannot run NGC PyTorch 24.10")


TABLE = lock.load_table()


def test_image_problems_checks_a_command_line_image_against_a_driver_without_a_lock():
    """For launch's --image: the same rules, its own names in the lines."""
    assert lock_image.image_problems(f"{NGC}:25.03-py3@{DIGEST}", "570.124.06", TABLE) == []
    (problem,) = lock_image.image_problems(f"{NGC}:25.03-py3@{DIGEST}", "560.35.05", TABLE)
    assert problem.startswith("driver_version 560.35.05 cannot run NGC PyTorch 25.03 (CUDA 12.8.1)")
    (untagged,) = lock_image.image_problems(f"{NGC}:25.03-py3", "570.124.06", TABLE)
    assert untagged.startswith(f"--image {NGC}:25.03-py3 has a tag but no digest")
    (unlisted,) = lock_image.image_problems(f"{NGC}:25.05-py3@{DIGEST}", "575.57.08", TABLE)
    assert unlisted.startswith("--image is NGC PyTorch 25.05, which gpuprov's table does not list")


def test_image_problems_needs_an_own_image_s_cuda_and_checks_it():
    own = f"registry.example:5000/team/train:v3@{DIGEST}"
    (missing,) = lock_image.image_problems(own, "570.124.06", TABLE)
    assert "cannot look up its CUDA: set --image-cuda" in missing
    assert lock_image.image_problems(own, "570.124.06", TABLE, image_cuda="12.8.1") == []
    (old,) = lock_image.image_problems(own, "550.127.08", TABLE, image_cuda="12.8.1")
    assert old.startswith("driver_version 550.127.08 cannot run --image: its CUDA 12.8.1 needs driver >= ")
    (bad,) = lock_image.image_problems(own, "570.124.06", TABLE, image_cuda="12.8")
    assert bad.startswith("--image-cuda is 12.8: it must be the CUDA version inside the image")
    names = ("--image", "the image's CUDA")
    (named,) = lock_image.image_problems(own, "570.124.06", TABLE, names=names)
    assert "set the image's CUDA to the CUDA version inside it" in named
