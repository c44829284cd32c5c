#!/usr/bin/env bash
# The newest-Ansible lane: gpuprov on the newest ansible-core it supports (2.21, with the `ansible` package 14),
# which needs Python >= 3.12, so it runs in a Debian 13 (python3 3.13) controller container. In it: the unit
# tests (in the background, beside the steps after them), ansible-lint, `ansible-playbook --syntax-check
# playbooks/site.yml`, and `gpuprov bootstrap` of a 1-node debian12 sandbox, then its no-op re-run through
# Ansible (`--full`: changed=0) and one through the drift check (no drift, no Ansible run). Any DEPRECATION
# WARNING in the bootstrap output fails the lane. scripts/test.sh runs the whole suite on the host's
# ansible-core (2.19 on Debian 12) first.
#
# The controller image has what the local tests need on a controller besides Python: gpg and gpg-agent (the
# nvidia_repository entry tests make keys) and iproute2 (setup's network facts, which network_tuning's peer
# reading needs). It is built with debootstrap + docker import (no registry here) and tagged with a hash of
# its build steps and the requirements, so it is built once and reused until either changes. The wheels are
# downloaded on the host (which has PyPI) and installed offline in the rootfs.
#
# --no-setup: the caller has just run scripts/setup.sh. --image-only: only make sure the controller image is
# there (with --no-setup's meaning too). scripts/test.sh builds the image so in the background while its
# pytest runs (the build is mostly downloads; setup.sh there could rewrite .venv under pytest's feet), then
# runs the lane with --no-setup after pytest: its tests and bootstrap beside the integration tests would
# slow those past their timeouts on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

IMAGE_ONLY=false
case "${1:-}" in
  "") bash scripts/setup.sh ;;
  --no-setup) ;;
  --image-only) IMAGE_ONLY=true ;;
  *) echo "error: unknown argument '$1'; the options are --no-setup (scripts/setup.sh already ran) and --image-only" >&2; exit 2 ;;
esac

SUITE=trixie                     # Debian 13: python3 3.13
NEWEST=("ansible-core>=2.21,<2.22" "ansible>=14,<15")
IMAGE_REPOSITORY=gpuprov/controller
LABEL=gpuprov.controller

PY=.venv/bin/python

# gpuprov's own dependencies from pyproject.toml (its Ansible replaced by the newest), the test tools the
# lane runs (matplotlib: bench's PNG tests), and hatchling with editables to install gpuprov itself
# (editable) offline.
mapfile -t REQUIREMENTS < <("$PY" - "${NEWEST[@]}" <<'EOF'
import re, sys, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
name = lambda req: re.match(r"[A-Za-z0-9_.-]+", req).group(0).lower()
test = {name(r): r for r in project["optional-dependencies"]["test"]}
deps = [r for r in project["dependencies"] if name(r) not in ("ansible", "ansible-core")]
wanted = [*sys.argv[1:], *deps, *(test[t] for t in ("pytest", "pytest-timeout", "ansible-lint", "matplotlib")), "hatchling", "editables"]
print("\n".join(wanted))
EOF
)

build_image() {
  local mirror work started=$SECONDS
  mirror=$("$PY" -c 'from gpuprov.sandbox import images; print(images.debian_mirror())')
  work=$(mktemp -d /tmp/gpuprov-controller-XXXXXX)
  # shellcheck disable=SC2064  # expand now: the trap must remove this build's directory
  trap "rm -rf '$work'" RETURN
  echo "== building the controller image $IMAGE (first time only, a few minutes)"
  "$PY" -m pip download -q --disable-pip-version-check --dest "$work/wheels" \
    --python-version 3.13 --only-binary=:all: "${REQUIREMENTS[@]}" 2>&1 | grep -v "is ignored" || true
  debootstrap --variant=minbase --include=python3,python3-venv,openssh-client,ca-certificates,gpg,gpg-agent,iproute2 \
    "$SUITE" "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; echo "error: debootstrap $SUITE from $mirror failed" >&2; return 3; }
  mv "$work/wheels" "$work/rootfs/tmp/wheels"
  printf '%s\n' "${REQUIREMENTS[@]}" >"$work/rootfs/tmp/requirements.txt"
  chroot "$work/rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 \
    /bin/sh -ec 'python3 -m venv /opt/gpuprov
      /opt/gpuprov/bin/pip install -q --disable-pip-version-check --no-index --find-links /tmp/wheels \
        -r /tmp/requirements.txt
      rm -rf /tmp/wheels /tmp/requirements.txt /var/lib/apt/lists/* /var/cache/apt/*.bin'
  tar -C "$work/rootfs" --numeric-owner -c . | docker import \
    --change "ENV PATH=/opt/gpuprov/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --change "ENV LC_ALL=C.UTF-8" --change "LABEL $LABEL=$SUITE" --change 'CMD ["/bin/bash"]' \
    --message "gpuprov controller, Debian $SUITE, ${NEWEST[*]}" - "$IMAGE" >/dev/null
  # Older builds of this lane's image (one in use by a container stays).
  docker image ls --filter "label=$LABEL" --format '{{.Repository}}:{{.Tag}}' | grep -vxF "$IMAGE" \
    | xargs -r docker image rm >/dev/null 2>&1 || true
  echo "== built $IMAGE in $((SECONDS - started)) s"
}

# The image's tag: a hash of what it is built from (the build steps above, the suite, the requirements).
HASH=$({ declare -f build_image; printf '%s\n' "$SUITE" "${REQUIREMENTS[@]}"; } | sha256sum | cut -c1-12)
IMAGE="$IMAGE_REPOSITORY:$SUITE-$HASH"
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "== the controller image $IMAGE is there"
else
  build_image
fi
if "$IMAGE_ONLY"; then
  exit 0
fi

# A 1-node sandbox of its own, with its own state dir, removed at the end whatever happens.
NAME="newest-ansible-$(head -c3 /dev/urandom | od -An -tx1 | tr -d ' \n')"
STATE=$(mktemp -d /tmp/gpuprov-newest-XXXXXX)
export GPUPROV_STATE_DIR=$STATE
cleanup() {
  docker rm -f "gpuprov-$NAME-controller" >/dev/null 2>&1 || true
  .venv/bin/gpuprov sandbox down --name "$NAME" >/dev/null 2>&1 || true
  rm -rf "$STATE"
}
trap cleanup EXIT
.venv/bin/gpuprov sandbox up --nodes 1 --os debian12 --name "$NAME"
INVENTORY=$(.venv/bin/gpuprov sandbox inventory --name "$NAME")

# The controller joins the sandbox's network and sees the state dir (inventory, keys, known_hosts) at the
# same path; the inventory keeps strict host key checking on. The checkout is copied, never written.
docker run --rm --name "gpuprov-$NAME-controller" --network "gpuprov-$NAME" \
  -v "$ROOT:/src:ro" -v "$STATE:$STATE" -e GPUPROV_STATE_DIR="$STATE" -e INVENTORY="$INVENTORY" \
  "$IMAGE" /bin/bash -euo pipefail -c '
    mkdir /work
    tar -C /src --exclude=./.venv --exclude=./.git --exclude=./.cache --exclude=__pycache__ -c . | tar -C /work -x
    cd /work
    pip install -q --disable-pip-version-check --no-index --no-deps --no-build-isolation -e .
    echo "== $(ansible --version | head -1), $(python3 --version)"

    # The sandbox tests (tests/unit/sandbox, tests/local/sandbox: the mirror built with gpg, apt-ftparchive and
    # torch wheels) have no Ansible in them, and the whole suite runs them. So does it the tests marked
    # integration: the reboot play runs against a chroot of the controller itself, Debian 13 here, which the
    # roles refuse; and those marked gpu, which need a real GPU.
    # They run in the background, beside the steps below, and their output is shown after them: pytest keeps
    # one core busy, ansible-lint and the bootstrap mostly the other (the sandbox node and Ansible workers),
    # so the lane ends about a minute and a half sooner on 2 cores than with one after the other
    # (docs/developers/tests.md). Their own state dir: the bootstrap below writes its runs into $STATE.
    # A failed step below ends the lane at once; the container (--rm) takes the tests with it.
    echo "== unit tests and tests/local (but the sandbox tests and those marked integration or gpu)," \
      "started in the background"
    # test_nvidia_smi_parsing includes nvidia_driver task files on localhost, and with them the platform
    # check, which refuses this Debian 13 controller.
    GPUPROV_STATE_DIR=/tmp/tests-state pytest -q -p no:cacheprovider tests/unit tests/local \
      -m "not integration and not gpu" --ignore tests/unit/sandbox --ignore tests/local/sandbox \
      --ignore tests/local/roles/test_nvidia_smi_parsing.py >/tmp/tests.log 2>&1 &
    tests=$!

    echo "== ansible-lint (production profile, see .ansible-lint), at $SECONDS s"
    ansible-lint -q roles playbooks

    echo "== ansible-playbook --syntax-check (settings from ./ansible.cfg), at $SECONDS s"
    ansible-playbook -i localhost, --syntax-check playbooks/site.yml

    echo "== gpuprov bootstrap of a 1-node debian12 sandbox, its no-op re-run through Ansible (--full), then" \
      "one through the drift check, at $SECONDS s"
    for run in first again:--full nodrift; do
      name=${run%%:*}; option=${run#"$name"}; option=${option#:}
      if ! gpuprov bootstrap --json $option "$INVENTORY" >"/tmp/$name.json" 2>"/tmp/$name.err"; then
        cat "/tmp/$name.err" >&2; echo "error: the $name bootstrap failed" >&2; exit 1
      fi
    done
    python3 - /tmp/again.json /tmp/nodrift.json <<"EOF"
import json, sys
summary = json.load(open(sys.argv[1]))
changed = {host: h["changed"] for host, h in summary["hosts"].items() if h["changed"]}
if changed or summary["ansible_rc"] != 0:
    sys.exit(f"error: the --full re-run changed something: {changed} (ansible rc {summary["ansible_rc"]})")
print(f"the --full re-run changed nothing on {len(summary["hosts"])} host(s)")
nodrift = json.load(open(sys.argv[2]))
if nodrift["ansible_rc"] is not None or any(h["changed"] for h in nodrift["hosts"].values()):
    sys.exit(f"error: the drift check found drift after a no-op run: {nodrift.get("drift")}")
print(f"the drift check found no drift and ran no Ansible on {len(nodrift["hosts"])} host(s)")
EOF
    if grep -n "DEPRECATION WARNING" /tmp/*.err "$GPUPROV_STATE_DIR"/runs/*/stdout; then
      echo "error: deprecation warnings in the bootstrap output (above)" >&2; exit 1
    fi
    echo "no deprecation warning in the bootstraps, at $SECONDS s"

    tests_rc=0
    wait "$tests" || tests_rc=$?
    echo "== unit tests and tests/local (ran beside the steps above), done at $SECONDS s"
    cat /tmp/tests.log
    if [ "$tests_rc" -ne 0 ]; then
      echo "error: the unit tests and tests/local failed (exit $tests_rc, above)" >&2; exit "$tests_rc"
    fi
  '
echo "== newest-Ansible lane passed in $SECONDS s"
