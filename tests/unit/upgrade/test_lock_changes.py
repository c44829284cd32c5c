"""What a new lock changes, per field and per host (gpuprov.lock_changes)."""

from __future__ import annotations

from gpuprov import lock, lock_changes
from tests.unit.upgrade.locks import LOCK_A, LOCK_B, VERIFIED_A, VERIFIED_B


def test_both_locks_fit_the_table() -> None:
    assert lock.check(LOCK_A) == []
    assert lock.check(LOCK_B) == []


def test_the_fields_that_change_in_the_locks_order() -> None:
    changes = lock_changes.field_changes(LOCK_A, LOCK_B)
    assert [(c.field, c.old, c.new) for c in changes] == [
        ("driver_branch", "550", "570"),
        ("driver_version", "550.127.08", "570.124.06"),
        ("cuda_version", "12.4.1", "12.6.3"),
        ("nccl_version", "2.21.5", "2.23.4"),
    ]
    assert not any(c.downgrade for c in changes)
    assert all(c.downgrade for c in lock_changes.field_changes(LOCK_B, LOCK_A))


def test_a_host_at_lock_a_needs_the_driver_cuda_cudnn_and_nccl_roles_and_a_reboot() -> None:
    changes = lock_changes.host_changes("node1", LOCK_A, LOCK_B, VERIFIED_A)
    assert [(p.component, p.have, p.want, p.source) for p in changes.parts] == [
        ("driver", "550.127.08", "570.124.06", "verified"),
        ("cuda", "12.4.1", "12.6.3", "verified"),
        ("nccl", "2.21.5+cuda12.4", "2.23.4", "verified"),
    ]
    # cuDNN's version stays, but its package is chosen by CUDA's major: a new CUDA runs its role again.
    assert changes.roles == ["nvidia_driver", "cuda", "cudnn", "nccl"]
    assert changes.reboot
    assert any("reboots" in line for line in changes.jobs)


def test_a_host_already_at_lock_b_changes_nothing() -> None:
    changes = lock_changes.host_changes("node1", LOCK_A, LOCK_B, VERIFIED_B)
    assert changes.parts == [] and changes.roles == [] and not changes.reboot


def test_the_hosts_verified_state_wins_over_the_old_lock() -> None:
    """A host the files call lock A but whose roles verified another NCCL: that NCCL is what changes."""
    drifted = {**VERIFIED_B, "nccl": "2.21.5+cuda12.4"}
    changes = lock_changes.host_changes("node1", LOCK_A, LOCK_B, drifted)
    assert [(p.component, p.have) for p in changes.parts] == [("nccl", "2.21.5+cuda12.4")]
    assert not changes.reboot  # only a library: no reboot


def test_without_a_record_the_old_lock_is_assumed() -> None:
    changes = lock_changes.host_changes("node1", LOCK_A, LOCK_B, None)
    assert {p.source for p in changes.parts} == {"old lock"}
    assert [p.have for p in changes.parts] == ["550.127.08", "12.4.1", "2.21.5"]


def test_a_downgrade_is_seen_per_host() -> None:
    changes = lock_changes.host_changes("node1", LOCK_B, LOCK_A, VERIFIED_B)
    assert [p.component for p in changes.downgrades] == ["driver", "cuda", "nccl"]


def test_a_flavor_change_alone_is_a_driver_change_with_a_reboot() -> None:
    proprietary = {**LOCK_A, "driver_flavor": "proprietary"}
    changes = lock_changes.host_changes("node1", LOCK_A, proprietary, VERIFIED_A)
    assert [p.component for p in changes.parts] == ["driver"] and changes.reboot


def test_pytorch_compares_its_build_tag_and_openmpi_its_series() -> None:
    cu = {**LOCK_A, "pytorch_cuda_tag": "cu124", "openmpi_version": "4.1"}
    changes = lock_changes.host_changes("node1", LOCK_A, cu, {**VERIFIED_A, "openmpi": "4.1.4"})
    assert [(p.component, p.want) for p in changes.parts] == [("pytorch", "2.13.0+cu124")]
    assert changes.roles == ["python_env"]


def test_a_driver_only_change_runs_the_driver_role_alone() -> None:
    new = {**LOCK_A, "driver_branch": "570", "driver_version": "570.124.06"}
    changes = lock_changes.host_changes("node1", LOCK_A, new, VERIFIED_A)
    assert changes.roles == ["nvidia_driver"] and changes.reboot


def test_a_batch_runs_the_union_of_its_hosts_roles_in_site_yml_order() -> None:
    assert lock_changes.batch_roles([["python_env"], ["nvidia_driver"], []]) == [
        "nvidia_driver",
        "python_env",
    ]
    assert lock_changes.batch_roles([]) == []


def test_every_role_a_component_names_is_a_tag_of_site_yml() -> None:
    """The rollout passes the roles as --tags: each must be a tag site.yml defines, else the run would
    apply nothing (gpuprov's tag check would refuse it)."""
    from gpuprov import resources
    from gpuprov.ansible import arguments, tags

    defined = tags.defined(arguments.playbook_path("site.yml"), resources.data_dir("roles"))
    assert defined is not None
    named = {role for c in lock_changes.COMPONENTS for role in (c.role, *c.readers)}
    assert named <= set(lock_changes.SITE_ROLES) <= defined


def test_a_new_horovod_runs_python_env_and_mpi() -> None:
    """python_env builds it, the mpi role installs Open MPI's headers for it (mpi_devel)."""
    old = {**LOCK_A, "horovod_version": "0.27.0"}
    new = {**LOCK_A, "horovod_version": "0.28.1"}
    changes = lock_changes.host_changes("node1", old, new, {**VERIFIED_A, "horovod": "0.27.0"})
    assert [(p.component, p.have, p.want) for p in changes.parts] == [("horovod", "0.27.0", "0.28.1")]
    assert changes.roles == ["mpi", "python_env"] and not changes.reboot
