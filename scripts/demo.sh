#!/usr/bin/env bash
# The demo: set up this machine, start a 2-node sandbox cluster and show that Ansible reaches every
# node through the inventory gpuprov wrote, with host key checking on and sudo working.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"

gpuprov sandbox up --nodes 2
inventory=$(gpuprov sandbox inventory)
echo
echo "== Ansible reaches the nodes through $inventory"
ANSIBLE_HOST_KEY_CHECKING=True ansible -i "$inventory" gpu_nodes -b -m ansible.builtin.command \
  -a 'sh -c "echo $(hostname): $(id -un) on $(. /etc/os-release; echo $PRETTY_NAME)"' -o
echo
echo "Done. Remove the sandbox with: .venv/bin/gpuprov sandbox down"
