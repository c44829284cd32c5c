#!/usr/bin/env bash
# Run every check gpuprov has: lint, then unit and integration tests (real containers, real Ansible).
# Extra arguments go to pytest, e.g. `scripts/test.sh -m "not integration"`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

echo "== ruff"
.venv/bin/ruff check src tests benchmarks examples
.venv/bin/ruff format --check src tests benchmarks examples
echo "== ansible-lint (production profile, see .ansible-lint)" && .venv/bin/ansible-lint roles playbooks

echo "== pytest"
exec .venv/bin/pytest "$@"
