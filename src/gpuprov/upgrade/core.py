"""`gpuprov upgrade` from its options to the exit code: the input and the lock (before any host), the
hosts' verified versions, the preflight with the new lock, Slurm's view of the nodes, the plan; then the
rollout (rollout.py) on the engine (each batch: playbooks/site.yml limited to it) and check's gate.
"""

from __future__ import annotations

import datetime
import secrets
from typing import Any

from gpuprov import console, host_preflight, hosts, lock, lock_changes, lock_file
from gpuprov.ansible import recorded_versions
from gpuprov.errors import BadInput, ExitCode, GpuprovError
from gpuprov.upgrade import estimate, service, state
from gpuprov.upgrade import plan as planning
from gpuprov.upgrade import rollout as rolling
from gpuprov.upgrade.options import UpgradeOptions
from gpuprov.upgrade.progress import Reporter

CONTROLLER_GROUP = "slurm_controller"


def run(opts: UpgradeOptions) -> ExitCode:
    stack = lock_file.read(opts.lock)
    problems = lock.check(stack)
    if problems:
        raise BadInput(f"NEW_LOCK {opts.lock} does not fit: {problems[0]}; nothing was drained")
    inventory = hosts.load(opts.inventory, opts.limit)
    existing = state.load(inventory.path)
    _check_resume(opts, existing, stack)
    if opts.resume and existing is not None:
        with state.held(inventory.path):
            return _continue(opts, existing, inventory)
    plan, controller = _plan(opts, inventory, stack)
    if opts.dry_run or not plan.batches:
        return ExitCode.OK
    with state.held(inventory.path):
        return _start(opts, inventory, stack, plan, controller)


def _check_resume(opts: UpgradeOptions, existing: state.Rollout | None, stack: dict[str, Any]) -> None:
    if opts.resume:
        if existing is None or existing.data.get("status") == "done":
            raise BadInput("--resume: no rollout of this inventory to continue; run without --resume")
        if existing.data["lock"] != stack:
            raise BadInput(
                f"--resume: NEW_LOCK {opts.lock} is not the lock of rollout {existing.data['id']}; give that "
                f"lock ({existing.lock_file}) or finish it first"
            )
    elif existing is not None and existing.data.get("status") != "done" and not opts.dry_run:
        raise BadInput(
            f"rollout {existing.data['id']} of this inventory is not finished "
            f"({existing.data.get('status')}); "
            f"continue it with `gpuprov upgrade {opts.lock} --resume`, or move {existing.directory} away"
        )


def _plan(
    opts: UpgradeOptions, inventory: hosts.Inventory, stack: dict[str, Any]
) -> tuple[planning.Plan, hosts.Host | None]:
    """The plan from each host's verified versions (else its inventory lock), shown; downgrades refused."""
    records = recorded_versions.latest(inventory.path, inventory.names)
    old = _inventory_lock(inventory)
    changes = {
        name: lock_changes.host_changes(
            name, old.get(name, {}), stack, r.versions if (r := records.get(name)) else None
        )
        for name in inventory.names
    }
    planning.refuse_downgrades(changes, opts.allow_downgrade)
    controller = _controller(inventory)
    per_batch = opts.max_unavailable.hosts(len(inventory.names))
    plan = planning.make(changes, opts.canary, per_batch, _in_batches(controller, inventory))
    _show_plan(opts, plan, controller.name if controller else None)
    return plan, controller


def _start(
    opts: UpgradeOptions,
    inventory: hosts.Inventory,
    stack: dict[str, Any],
    plan: planning.Plan,
    controller: hosts.Host | None,
) -> ExitCode:
    _preflight(inventory, stack)
    nodes, slurm = _slurm_view(inventory, controller)
    try:
        states = slurm.states(list(nodes.values()))
        rollout = state.create(
            inventory.path, _new_state(opts, plan, nodes, states, stack, controller), stack
        )
        return _roll(opts, rollout, inventory, slurm)
    finally:
        _close(slurm)


def _continue(opts: UpgradeOptions, rollout: state.Rollout, inventory: hosts.Inventory) -> ExitCode:
    missing = sorted(set(rollout.data["hosts"]) - set(inventory.names))
    if missing:
        raise BadInput(
            f"--resume: host(s) {', '.join(missing)} of the rollout are not in the inventory (--limit?)"
        )
    for entry in rollout.data["hosts"].values():
        if entry["phase"] == state.FAILED:
            entry["phase"] = state.PENDING  # retried: the operator has fixed it (or its jobs ended)
    rollout.data["status"] = "running"
    rollout.save()
    console.step(f"Resuming rollout {rollout.data['id']}")
    slurm = _service(_recorded_controller(rollout, inventory))
    try:
        return _roll(opts, rollout, inventory, slurm)
    finally:
        _close(slurm)


def _roll(
    opts: UpgradeOptions, rollout: state.Rollout, inventory: hosts.Inventory, slurm: service.Service
) -> ExitCode:
    from gpuprov.launch import api as launch_api
    from gpuprov.upgrade import actions

    expected = estimate.batches(
        rollout.data["plan"], rollout.data["hosts"], estimate.load(rollout.directory), opts.gate
    )
    reporter = Reporter(opts.json, len(rollout.data["plan"]), rollout.data["id"], expected)
    steps = rolling.Steps(
        service=slurm,
        apply=lambda names: actions.apply(
            inventory.path,
            names,
            rollout.lock_file,
            opts.reboot_timeout,
            actions.batch_roles(rollout, names, opts.all_roles),
        ),
        gate=lambda names, peers: actions.gate(
            inventory.path, names, rollout, quick=opts.gate == "quick", peers=peers
        ),
        gate_peer=opts.gate == "full",
        gate_kind=opts.gate,
        ssh_jobs=actions.ssh_jobs,
        stop_job=launch_api.stop_job,
        kill_jobs=opts.kill_jobs,
        drain_timeout_s=opts.drain_timeout,
        max_failures=opts.max_failures,
    )
    try:
        code = rolling.run(rollout, steps, reporter)
    except (KeyboardInterrupt, GpuprovError) as exc:
        rollout.data["status"] = "interrupted"
        rollout.save()
        if isinstance(exc, GpuprovError) and exc.exit_code != ExitCode.INTERRUPTED:
            raise GpuprovError(
                f"{exc.message}; the rollout's state is kept: `gpuprov upgrade --resume` goes on",
                exc.exit_code,
            ) from None
        raise GpuprovError(
            f"interrupted: rollout {rollout.data['id']} stopped; hosts keep their phase "
            f"(state: {rollout.path}); "
            f"run `gpuprov upgrade {opts.lock} --resume` to go on",
            ExitCode.INTERRUPTED,
        ) from None
    if code == ExitCode.OK:
        console.info(
            f"Every host runs the new lock: set gpu_stack in the inventory to {opts.lock}'s (a later "
            "`gpuprov bootstrap` would otherwise move the hosts back)"
        )
    return code


def _inventory_lock(inventory: hosts.Inventory) -> dict[str, dict[str, Any]]:
    """Each host's lock as its inventory sets it (the old lock, where no run recorded the host)."""
    found = {}
    for host in inventory.hosts:
        stack = host.vars.get(hosts.LOCK_VARIABLE)
        found[host.name] = dict(stack) if isinstance(stack, dict) else {}
    return found


def _controller(inventory: hosts.Inventory) -> hosts.Host | None:
    """The host of [slurm_controller] (None: no Slurm), a GPU node or not, and whether --limit kept it: a
    controller outside the hosts upgraded is never in a batch, Slurm is still drained through it."""
    found = hosts.load_group(inventory.path, CONTROLLER_GROUP)
    if len(found) > 1:
        raise BadInput(
            f"{inventory.path}: group [{CONTROLLER_GROUP}] has {', '.join(h.name for h in found)}; Slurm has "
            "one controller (the slurm role's rule): leave only the host that runs slurmctld in it"
        )
    return found[0] if found else None


def _in_batches(controller: hosts.Host | None, inventory: hosts.Inventory) -> str | None:
    """The controller's name when it is one of the hosts upgraded (it then goes last, alone)."""
    return controller.name if controller is not None and controller.name in inventory.names else None


def _show_plan(opts: UpgradeOptions, plan: planning.Plan, controller: str | None) -> None:
    rows = planning.lines(plan)
    if opts.json:
        console.result(planning.as_json(plan, controller))
        return
    if controller is not None and not any(controller in batch for batch in plan.batches):
        console.info(f"Slurm: drained and resumed through its controller {controller}, which is in no batch")
    console.table(
        f"Upgrade plan: {len(plan.batches)} batch(es), at most {opts.max_unavailable} host(s) out at once",
        ["batch", "host", "changes", "reboot"],
        rows,
    )
    _show_roles(opts, plan)
    if opts.dry_run:
        console.info("--dry-run: nothing was drained or changed")


def _show_roles(opts: UpgradeOptions, plan: planning.Plan) -> None:
    """Which roles each batch applies (site.yml's tags; the preflight always runs)."""
    if opts.all_roles:
        console.info("--all-roles: each batch applies all of site.yml (Slurm's play left out)")
        return
    for number, batch in enumerate(plan.batches, start=1):
        roles = lock_changes.batch_tags(plan.changes[name].roles for name in batch)
        label = "canary" if number == 1 and plan.canary else f"batch {number}"
        console.info(f"{label} applies: preflight, {', '.join(roles) or 'all of site.yml'}")


def _preflight(inventory: hosts.Inventory, stack: dict[str, Any]) -> None:
    console.step(f"Preflight on {len(inventory.hosts)} host(s) with the new lock (read-only)")
    reports, lock_problems = host_preflight.run(inventory, {hosts.LOCK_VARIABLE: stack})
    problems = [p for r in reports for p in r.problems] + lock_problems
    if problems:
        first = problems[0]
        raise GpuprovError(
            f"{first.host}: {first.check}: {first.message} ({len(problems)} problem(s)); nothing was drained",
            host_preflight.exit_code(reports, lock_problems),
        )


def _slurm_view(
    inventory: hosts.Inventory, controller: hosts.Host | None
) -> tuple[dict[str, str], service.Service]:
    """Each host's Slurm node name and the service that drains it; an inventory whose hosts Slurm does not
    know is refused (exit 7) before anything is drained."""
    if controller is None:
        return {name: name for name in inventory.names}, service.NoScheduler()
    slurm = service.Slurm(controller)
    try:
        nodes = slurm.node_names(inventory)
    except BaseException:
        slurm.close()
        raise
    missing = service.missing_nodes(inventory, nodes)
    if missing:
        slurm.close()
        raise GpuprovError(
            f"Slurm on {controller.name} has no node that is {', '.join(missing)} (by name, NodeHostName, "
            "NodeAddr = ansible_host, or FQDN's first label): the inventory and slurm.conf disagree; fix the "
            "inventory or run `gpuprov bootstrap` first; nothing was drained",
            ExitCode.PREFLIGHT_FAILED,
        )
    return nodes, slurm


def _recorded_controller(rollout: state.Rollout, inventory: hosts.Inventory) -> hosts.Host | None:
    """The controller a resumed rollout drains through: the inventory's, which must be the one recorded."""
    if not rollout.data.get("slurm"):
        return None
    controller = _controller(inventory)
    if controller is None or controller.name != rollout.data.get("controller"):
        raise BadInput(
            f"--resume: rollout {rollout.data['id']} drained nodes through the Slurm controller "
            f"{rollout.data.get('controller')}, and the inventory's [{CONTROLLER_GROUP}] is "
            f"{controller.name if controller else 'empty'}; put it back, then resume"
        )
    return controller


def _service(controller: hosts.Host | None) -> service.Service:
    return service.NoScheduler() if controller is None else service.Slurm(controller)


def _close(slurm: service.Service) -> None:
    if isinstance(slurm, service.Slurm):
        slurm.close()


def _new_state(
    opts: UpgradeOptions,
    plan: planning.Plan,
    nodes: dict[str, str],
    states: dict[str, service.NodeState],
    stack: dict[str, Any],
    controller: hosts.Host | None,
) -> dict[str, Any]:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    entries: dict[str, Any] = {}
    for number, batch in enumerate(plan.batches, start=1):
        for name in batch:
            now = states.get(nodes[name], service.NodeState("idle", ""))
            admin = now.out_of_service and not now.ours
            entries[name] = {
                "phase": state.PENDING, "batch": number, "node": nodes[name], "drained_by_us": False,
                "admin_drained": admin, "admin_reason": now.reason if admin else None, "error": None,
                "changes": plan.changes[name].as_dict(),
            }  # fmt: skip
    return {
        "id": f"{stamp}-{secrets.token_hex(2)}", "inventory": str(opts.inventory.resolve()), "lock": stack,
        "plan": plan.batches, "canary": plan.canary, "controller": controller.name if controller else None,
        "slurm": controller is not None, "status": "running", "hosts": entries,
        "unchanged": {name: nodes[name] for name in plan.unchanged if name in nodes},  # gate peers
    }  # fmt: skip
