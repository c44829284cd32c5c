"""The lock's optional horovod_version: refused with a PyTorch Horovod cannot compile against."""

from __future__ import annotations

import importlib.util

from gpuprov import lock, resources
from gpuprov.sandbox.inventory import SANDBOX_LOCK

# A legacy lock: the sandbox's stack with the newest PyTorch Horovod 0.28.1 builds against.
LEGACY = {**SANDBOX_LOCK, "pytorch_version": "2.0.1", "pytorch_cuda_tag": "cpu", "horovod_version": "0.28.1"}


def test_every_horovod_row_has_its_pytorch_range_reason_and_source():
    table = lock.load_table()
    pytorch = [r["version"] for r in table["pytorch"]]
    for row in table["horovod"]:
        assert row["source"] and row["fails"], row
        assert lock._key(row["pytorch_min"]) <= lock._key(row["pytorch_max"]), row
        # The newest PyTorch it builds against is one a lock can name.
        assert any(v.startswith(row["pytorch_max"] + ".") for v in pytorch), row


def test_a_legacy_lock_with_horovod_and_pytorch_2_0_fits():
    assert lock.check(LEGACY) == []


def test_a_lock_without_horovod_is_not_asked_about_it():
    assert "horovod_version" not in SANDBOX_LOCK
    assert lock.check(SANDBOX_LOCK) == []


def test_horovod_with_a_pytorch_it_cannot_build_against_is_one_line_naming_the_fact_and_what_works():
    problems = lock.check({**LEGACY, "pytorch_version": "2.13.0"})
    assert len(problems) == 1
    message = problems[0]
    assert "\n" not in message
    assert message.startswith("horovod_version 0.28.1 does not build against pytorch_version 2.13.0: ")
    assert "PyTorch 2.1+ needs C++17 (horovod#3996, #4014" in message
    assert "the newest PyTorch it builds against is 2.0.x (in the table: 2.0.1)" in message


def test_pytorch_2_1_is_the_first_refused_minor():
    table = {
        **lock.load_table(),
        "pytorch": [
            {"version": v, "cuda_tags": ["cpu"], "source": "test"} for v in ("2.0.1", "2.1.2", "2.5.1")
        ],
    }
    assert lock.check({**LEGACY, "pytorch_version": "2.0.1"}, table) == []
    assert lock.check({**LEGACY, "pytorch_version": "2.1.2"}, table)[0].startswith(
        "horovod_version 0.28.1 does not build against pytorch_version 2.1.2"
    )


def test_an_unlisted_or_malformed_horovod_version_is_refused():
    assert lock.check({**LEGACY, "horovod_version": "0.27.0"}) == [
        f"horovod_version 0.27.0 is not in gpuprov's compatibility table (listed: 0.28.1); {lock.HOW_TO_ADD}"
    ]
    assert lock.check({**LEGACY, "horovod_version": "latest"}) == [
        "gpu_stack.horovod_version is 'latest': it must be a Horovod release such as \"0.28.1\""
    ]
    assert lock.check({**LEGACY, "horovod_version": ""}) == [
        'gpu_stack.horovod_version is not set: set it to a Horovod release such as "0.28.1"'
    ]


def test_site_yml_first_play_refuses_the_same_way():
    """playbooks/filter_plugins/gpu_stack.py (validate_inventory_and_lock.yml) passes the whole lock on."""
    plugin = resources.data_dir("playbooks") / "filter_plugins" / "gpu_stack.py"
    spec = importlib.util.spec_from_file_location("gpu_stack_filter", plugin)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    conflicts = module.FilterModule().filters()["gpu_stack_conflicts"]
    bad = {**LEGACY, "pytorch_version": "2.13.0"}
    assert conflicts({"node1": bad, "node2": LEGACY}, lock.load_table()) == [f"node1: {lock.check(bad)[0]}"]
