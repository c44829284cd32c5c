#!/usr/bin/env bash
# Run every check gpuprov has: lint, types and the docs build, then unit and integration tests (real
# containers, real Ansible) on the host's ansible-core (the oldest supported, 2.19, on Debian 12's Python
# 3.11), then the newest-Ansible lane
# (scripts/test-newest-ansible.sh: ansible-core 2.21 in a Debian 13 controller container).
#
# The lanes, cheapest first (tests/conftest.py marks each test by its folder):
#   scripts/test.sh --fast                ruff, mypy and the pure unit tests (tests/unit): no Ansible run, no
#                                         package tools, no Docker; well under a minute
#   scripts/test.sh -m "not integration"  ruff, mypy, ansible-lint, tests/unit and the quick tests of
#                                         tests/local (real ansible-playbook -c local, gpg, ...): no Docker
#   scripts/test.sh                       everything: the above, tests/local's slow tests, tests/integration
#                                         (Docker sandboxes, Molecule), then the newest-Ansible lane
# Extra arguments go to pytest (after --fast too, e.g. `scripts/test.sh --fast -x`); the newest-Ansible lane
# runs only with the whole suite (no arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

FAST=false
if [ "${1:-}" = "--fast" ]; then
  FAST=true
  shift
fi

echo "== ruff"
.venv/bin/ruff check src tests benchmarks examples playbooks/filter_plugins
.venv/bin/ruff format --check src tests benchmarks examples playbooks/filter_plugins
echo "== mypy (strict, see pyproject.toml)" && .venv/bin/mypy
if "$FAST"; then
  echo "== pytest tests/unit (the pure unit tests)"
  .venv/bin/pytest -q tests/unit "$@"
  exit 0
fi
echo "== ansible-lint (production profile, see .ansible-lint)" && .venv/bin/ansible-lint roles playbooks
# The docs (mkdocs.yml, strict: a broken link or anchor, or a page left out of the nav, fails), built into a
# temporary directory that is removed afterwards: nothing is written into the work tree.
docs_site=$(mktemp -d)
echo "== docs (mkdocs --strict)"
# Not --quiet: it hides the warnings that --strict counts, and the build then passes with a broken link.
.venv/bin/mkdocs build --strict --site-dir "$docs_site" || { rm -rf "$docs_site"; exit 1; }
rm -rf "$docs_site"

echo "== pytest"
.venv/bin/pytest "$@"

if [ "$#" -eq 0 ]; then
  echo "== the newest-Ansible lane"
  bash scripts/test-newest-ansible.sh
fi
