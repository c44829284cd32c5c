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
# runs only with the whole suite (no arguments), and then in the background while pytest runs (its image build,
# when the image is missing, and its tests took 8 of a fresh CI machine's 50 minutes).
# Each phase's seconds are printed when it ends and again, all together, when the script exits.
set -euo pipefail
cd "$(dirname "$0")/.."

PHASES=""
# timed NAME CMD...: run one phase, print its seconds and keep them for the summary.
timed() {
  local name=$1 started=$SECONDS rc=0
  shift
  echo "== $name"
  "$@" || rc=$?
  local line
  line=$(printf '%6d s  %s' $((SECONDS - started)) "$name")
  [ "$rc" -eq 0 ] || line+=" (failed: exit $rc)"
  echo "== $line"
  PHASES+="$line"$'\n'
  return "$rc"
}
LANE=""  # the newest-Ansible lane's pid while it runs beside pytest
on_exit() {
  # Ctrl-C reaches pytest but not a background job (a script's `&` jobs ignore SIGINT): stop the lane too,
  # its own EXIT trap then removes its sandbox and controller container.
  [ -z "$LANE" ] || kill "$LANE" 2>/dev/null || true
  printf "== seconds per phase\n%s%6d s  in all\n" "$PHASES" "$SECONDS"
}
trap on_exit EXIT
trap 'exit 130' INT  # through on_exit, which bash skips when a signal ends it
trap 'exit 143' TERM

timed "setup (scripts/setup.sh)" bash scripts/setup.sh

FAST=false
if [ "${1:-}" = "--fast" ]; then
  FAST=true
  shift
fi

# Chained with &&: `timed` runs a phase under `||`, where bash ignores set -e inside the function, so a
# failed first command would otherwise be hidden by the second's exit status.
python_lint() {
  .venv/bin/ruff check src tests benchmarks examples playbooks/filter_plugins \
    && .venv/bin/ruff format --check src tests benchmarks examples playbooks/filter_plugins
}
timed "ruff" python_lint
timed "mypy (strict, see pyproject.toml)" .venv/bin/mypy
if "$FAST"; then
  timed "pytest tests/unit (the pure unit tests)" .venv/bin/pytest -q tests/unit "$@"
  exit 0
fi
timed "ansible-lint (production profile, see .ansible-lint)" .venv/bin/ansible-lint roles playbooks
# The docs (mkdocs.yml, strict: a broken link or anchor, or a page left out of the nav, fails), built into a
# temporary directory that is removed afterwards: nothing is written into the work tree.
docs() {
  local site rc=0
  site=$(mktemp -d)
  # Not --quiet: it hides the warnings that --strict counts, and the build then passes with a broken link.
  .venv/bin/mkdocs build --strict --site-dir "$site" || rc=$?
  rm -rf "$site"
  return "$rc"
}
timed "docs (mkdocs --strict)" docs

if [ "$#" -ne 0 ]; then
  timed "pytest" .venv/bin/pytest "$@"
  exit 0
fi

# The whole suite: the newest-Ansible lane's controller image is built in the background while pytest runs
# (mostly downloads: debootstrap and pip download), the lane itself after pytest (its unit tests and
# bootstrap beside the integration tests would slow those past their timeouts on 2 cores). Both run to the
# end either way: the script then fails if either failed, and no build outlives it.
image_log=$(mktemp /tmp/gpuprov-newest-ansible-image-XXXXXX.log)
bash scripts/test-newest-ansible.sh --image-only >"$image_log" 2>&1 &
LANE=$!
lane_rc=0
pytest_rc=0
timed "pytest" .venv/bin/pytest || pytest_rc=$?
wait_for_image() {
  local rc=0
  wait "$LANE" || rc=$?
  LANE=""
  cat "$image_log"
  rm -f "$image_log"
  return "$rc"
}
timed "the newest-Ansible lane's image (built beside pytest; this phase is the wait after it)" wait_for_image \
  || lane_rc=$?
[ "$lane_rc" -ne 0 ] || timed "the newest-Ansible lane" bash scripts/test-newest-ansible.sh --no-setup || lane_rc=$?
[ "$pytest_rc" -eq 0 ] || exit "$pytest_rc"
exit "$lane_rc"
