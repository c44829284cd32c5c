#!/usr/bin/env bash
# The demo: set up this machine, start a 2-node sandbox cluster, bootstrap it with gpuprov (NVIDIA stack
# stand-ins, network tuning, a PyTorch environment), check it (gpuprov check) and launch a 2-node DDP
# training on it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"

gpuprov sandbox up --nodes 2
inventory=$(gpuprov sandbox inventory)

echo
echo "== gpuprov bootstrap $inventory"
gpuprov bootstrap "$inventory"

echo
echo "== gpuprov check $inventory"
gpuprov check "$inventory"

echo
echo "== gpuprov launch --nodes 2 examples/train_ddp.py"
gpuprov launch -i "$inventory" --nodes 2 examples/train_ddp.py -- --epochs 3

echo
echo "Done. Remove the sandbox with: .venv/bin/gpuprov sandbox down"
