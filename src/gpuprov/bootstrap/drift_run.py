"""The drift check inside one `gpuprov bootstrap` run: probe during the preflight, plan, record after.

- `probe(host, client)` runs during the preflight over its open SSH connection (host_preflight's `also`);
- `decide(run, reports)` compares each host with its record (gpuprov.bootstrap.drift), says what drifted and
  sets the run's hosts and tags, or that no Ansible run is needed;
- `after(run, outcome, states)` (the engine's after_ansible) probes the hosts that ended ok again and records
  them; a host that failed, or any host of a run that was stopped, loses its record (its next run is full).

Only made for a run without --tags, --skip-tags and --check (they choose the tasks themselves: nothing is
compared or recorded then); with --full nothing is compared and every role runs, and the records are renewed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from gpuprov import console, hosts, resources, ssh
from gpuprov.ansible import engine, recorded_versions, runner
from gpuprov.ansible.events import HostState
from gpuprov.bootstrap import drift, drift_probe, drift_records, fingerprint, role_map
from gpuprov.host_preflight import HostReport

SLURM_GROUP = "slurm_controller"
ANSIBLE_PATTERN = re.compile(r"[:,\[\]*?!&~^@]")  # what Ansible's host patterns give a meaning to


class DriftCheck:
    def __init__(self, run: engine.Run, checking: bool) -> None:
        self.checking = checking  # compare before Ansible (else only record after: --full)
        code = fingerprint.code()
        self.roles = role_map.load(run.playbook, resources.data_dir("roles"), code)
        common = fingerprint.shared(run.options.inventory, run.extravars, run.playbook, code)
        self.fingerprints = {
            h.name: fingerprint.for_host(common, h, run.extravars) for h in run.inventory.hosts
        }
        self.extravars = run.extravars
        self.all_hosts = list(run.inventory.hosts)
        self.asked = checking
        self.off = why = self._why_off(run)
        if why:
            self.checking = False
            run.directory.log(f"drift check: off, full run: {why}")
        run.after_ansible = self.after

    def _why_off(self, run: engine.Run) -> str:
        if self.roles.unrecorded:
            return f"roles that record no manifest: {', '.join(self.roles.unrecorded)}"
        # site.yml's Slurm play also runs on the slurm_controller group, which need not be GPU nodes: the
        # probe does not reach those hosts, so their drift would go unseen.
        names = set(run.inventory.names)
        outside = [
            h.name for h in hosts.load_group(run.options.inventory, SLURM_GROUP) if h.name not in names
        ]
        if outside:
            return f"{SLURM_GROUP} hosts outside the hosts probed: {', '.join(outside)}"
        odd = [name for name in names if ANSIBLE_PATTERN.search(name)]
        if odd:  # --limit would read the name as a pattern
            return f"a host name Ansible's --limit reads as a pattern: {odd[0]}"
        return ""

    def probe(self, host: hosts.Host, client: ssh.Client) -> dict[str, Any] | str:
        return drift_probe.run(client, host, self.extravars)

    def decide(self, run: engine.Run, reports: list[HostReport]) -> None:
        """Set the run's hosts and tags from what drifted (or skip Ansible); log and show why."""
        if self.asked and self.off:  # said once the preflight passed, not above a preflight's problem
            console.info(f"Drift check off ({self.off}): every role runs")
        if not self.checking:
            return
        checks = []
        for report in reports:
            record = drift_records.read(run.options.inventory, report.host)
            checks.append(drift.compare(report.host, self.fingerprints[report.host], record, report.extra))
        plan = drift.make_plan(checks, self.roles, run.inventory.names)
        run.summary["drift"] = plan.as_dict()
        for line in drift.lines(plan):
            run.directory.log(f"drift check: {line}")
            console.info(line)
        items = sum(check.items for check in checks)
        if not plan.runs_ansible:
            run.directory.log(
                f"drift check: no drift on {len(checks)} host(s), {items} items: no Ansible run"
            )
            console.success(
                f"No drift on {len(checks)} host(s) ({items} items checked): nothing to apply, changed=0"
            )
            run.summary["versions"] = _recorded_versions(run, run.inventory.names)
            run.skip_ansible = True
            return
        scope = f"roles {', '.join(plan.tags)}" if plan.tags else "every role"
        run.directory.log(f"drift check: Ansible on {', '.join(plan.hosts)}: {scope}")
        console.step(
            f"Drift check: {scope} on {len(plan.hosts)} of {len(checks)} host(s) ({items} items checked)"
        )
        run.summary["tags"] = list(plan.tags)  # a run limited by tags verified only those roles' versions
        run.summary["limit"] = ",".join(plan.hosts) if len(plan.hosts) < len(checks) else run.options.limit
        run.options = dataclasses.replace(run.options, limit=run.summary["limit"], tags=tuple(plan.tags))
        chosen = [h for h in run.inventory.hosts if h.name in plan.hosts]
        run.inventory = dataclasses.replace(run.inventory, hosts=chosen)

    def after(self, run: engine.Run, outcome: runner.Outcome, states: list[HostState]) -> None:
        """Record the hosts that ended ok; forget the others; keep every host's verified versions."""
        ran = {state.name: state for state in states}
        stopped = outcome.canceled or outcome.rc not in (0, 2, 4)  # 2, 4: a host failed or was unreachable
        good = [h for h in run.inventory.hosts if not stopped and _ended_ok(ran.get(h.name))]
        for host in run.inventory.hosts:
            if host not in good:
                drift_records.forget(run.options.inventory, host.name)
        self._record(run, good)
        untouched = [h.name for h in self.all_hosts if h.name not in ran]
        for name in untouched:  # not in the run: the drift check found them as the last ok run left them
            run.summary["hosts"][name] = engine.untouched_host(name)
        if run.summary.get("tags") or untouched:  # carry the versions the roles did not verify this time
            found = run.summary.get("versions", {})
            recorded = _recorded_versions(run, [h.name for h in self.all_hosts])
            run.summary["versions"] = {
                name: {**recorded.get(name, {}), **found.get(name, {})} for name in {*recorded, *found}
            }

    def _record(self, run: engine.Run, good: list[hosts.Host]) -> None:
        if self.off or not good:  # a record is of use only where the check runs
            return
        outcomes = ssh.fan_out(good, lambda h: drift_probe.run_alone(h, self.extravars), timeout=180)
        for outcome in outcomes:
            host = outcome.item
            report = outcome.value if outcome.error is None else f"no answer: {ssh.reason(outcome.error)}"
            fingerprint_ = self.fingerprints.get(host.name)
            record = (
                drift.record_of(report, fingerprint_, run.directory.id)
                if isinstance(report, dict) and fingerprint_
                else None
            )
            if record is None:
                drift_records.forget(run.options.inventory, host.name)
                why = report if isinstance(report, str) else "a manifest could not be read"
                run.directory.log(f"drift check: {host.name}: not recorded: {why}")
                continue
            problem = drift_records.write(run.options.inventory, host.name, record)
            run.directory.log(
                f"drift check: {host.name}: {f'not recorded: {problem}' if problem else 'recorded'}"
            )


def _ended_ok(state: HostState | None) -> bool:
    return state is not None and not state.failed and not state.unreachable and state.status != "pending"


def _recorded_versions(run: engine.Run, names: list[str]) -> dict[str, dict[str, str]]:
    found: Mapping[str, recorded_versions.Recorded] = recorded_versions.latest(run.options.inventory, names)
    return {name: dict(record.versions) for name, record in found.items()}
