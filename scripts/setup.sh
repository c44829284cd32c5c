#!/usr/bin/env bash
# Set up this machine for the demo and the tests: host packages, the Docker engine, a virtualenv with
# gpuprov and its test tools. Safe to run again; it only does what is missing.
#
#   scripts/setup.sh [--demo]    # --demo: gpuprov without its test tools (lint, Molecule, mkdocs ...),
#                                # which is all the demo runs; a later run without it adds them
set -euo pipefail
cd "$(dirname "$0")/.."

extras="test"
case "${1:-}" in
  "") ;;
  --demo) extras=none ;;
  *) echo "setup.sh: unknown argument '$1'; usage: scripts/setup.sh [--demo]" >&2; exit 2 ;;
esac

# What the demo needs (the Docker engine, debootstrap for the node images, the mirror's package tools, ssh),
# then what only the tests add: dnf for the rpm repository tests, shellcheck for the stand-in programs.
DEMO_PACKAGES=(docker.io debootstrap createrepo-c rpm apt-utils gnupg openssh-client ca-certificates)
TEST_PACKAGES=(dnf python3-dnf shellcheck)
HOST_PACKAGES=("${DEMO_PACKAGES[@]}")
[ "$extras" = none ] || HOST_PACKAGES+=("${TEST_PACKAGES[@]}")

# Seconds since $1 (an $EPOCHREALTIME), with one decimal.
seconds_since() {
  awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'
}

missing_packages() {
  local pkg
  for pkg in "${HOST_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || echo "$pkg"
  done
}

if [ -n "$(missing_packages)" ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "setup: needs root on Debian/Ubuntu to install: $(missing_packages | xargs)" >&2
    exit 3
  fi
  echo "setup: installing host packages: $(missing_packages | xargs)"
  started=$EPOCHREALTIME
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2046
  apt-get install -y -qq --no-install-recommends $(missing_packages) >/dev/null
  echo "setup: the host packages took $(seconds_since "$started") s"
fi

# Each sandbox node runs systemd, which takes several inotify instances; Debian's default of 128 per user
# ran out here with several sandboxes up (154 in use) and new containers then exited at once with status 255.
if [ "$(cat /proc/sys/fs/inotify/max_user_instances)" -lt 512 ] && [ "$(id -u)" -eq 0 ]; then
  sysctl -q -w fs.inotify.max_user_instances=512
fi

if ! docker info >/dev/null 2>&1; then
  # No systemd on the build machine: start the engine directly, in its own session.
  echo "setup: starting the Docker engine (log: /var/log/dockerd.log)"
  setsid dockerd >/var/log/dockerd.log 2>&1 < /dev/null &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "setup: the Docker engine did not start; see /var/log/dockerd.log" >&2; exit 3; }
fi

# What the install depends on: the Python and pyproject's dependency lists and commands. Other edits to
# pyproject.toml (pytest markers, lint settings) need no reinstall; the package itself is installed editable.
install_stamp() {
  python3 -c 'import hashlib, sys, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
wanted = [project.get(key) for key in ("dependencies", "optional-dependencies", "scripts")]
print(sys.version.split()[0], hashlib.sha256(repr(wanted).encode()).hexdigest())'
}

# .venv/.installed: the stamp, then what was installed on top of gpuprov ("test" or "none"); an install with
# the test tools serves the demo too.
installed=$(cat .venv/.installed 2>/dev/null || true)
stamp=$(install_stamp)
# A stamp without the second part is from before --demo, when every install had the test tools.
[ "$installed" != "$stamp" ] || installed="$stamp test"
if [ ! -x .venv/bin/gpuprov ] || { [ "$installed" != "$stamp test" ] && [ "$installed" != "$stamp $extras" ]; }; then
  started=$EPOCHREALTIME
  if [ "$extras" = test ]; then
    echo "setup: installing gpuprov and its test tools into .venv"
    target='.[test]'
  else
    echo "setup: installing gpuprov into .venv (without the test tools: scripts/setup.sh adds them)"
    target=.
  fi
  python3 -m venv .venv
  # pip byte-compiles every module it installs, and the `ansible` package's collections are 15,000 of the
  # 17,600 (240 MB of .pyc) though the controller imports few of them: the nodes get modules as source
  # (AnsiballZ). So: install without compiling, then compile all but the collections, which a user who cannot
  # write here would otherwise recompile in memory at every start. CPU-s measured in docs/demo.md.
  .venv/bin/pip install -q --disable-pip-version-check --no-compile -e "$target" 2>&1 | grep -v "is ignored" || true
  # A file that does not compile is left to import time, as pip leaves it.
  .venv/bin/python -m compileall -q -x /ansible_collections/ .venv/lib/python3*/site-packages >/dev/null || true
  .venv/bin/gpuprov --version >/dev/null
  echo "$stamp $extras" >.venv/.installed
  echo "setup: the virtualenv took $(seconds_since "$started") s"
fi
