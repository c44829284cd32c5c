#!/usr/bin/env bash
# Run every check gpuprov has: lint, then unit and integration tests (real containers, real Ansible) on the
# host's ansible-core (the oldest supported, 2.19, on Debian 12's Python 3.11), then the newest-Ansible lane
# (scripts/test-newest-ansible.sh: ansible-core 2.21 in a Debian 13 controller container).
# Extra arguments go to pytest, e.g. `scripts/test.sh -m "not integration"`; the newest-Ansible lane runs
# only with the whole suite (no arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

echo "== ruff"
.venv/bin/ruff check src tests benchmarks examples
.venv/bin/ruff format --check src tests benchmarks examples
echo "== mypy (strict, see pyproject.toml)" && .venv/bin/mypy
echo "== ansible-lint (production profile, see .ansible-lint)" && .venv/bin/ansible-lint roles playbooks

echo "== pytest"
.venv/bin/pytest "$@"

if [ "$#" -eq 0 ]; then
  echo "== the newest-Ansible lane"
  bash scripts/test-newest-ansible.sh
fi
