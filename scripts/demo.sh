#!/usr/bin/env bash
# The demo: set up this machine, start a 2-node sandbox cluster, bootstrap it with gpuprov (NVIDIA stack
# stand-ins, network tuning, a PyTorch environment), check it (gpuprov check) and launch a 2-node DDP
# training on it. Ends with the time each phase took (benchmarks/demo.py times it from a fresh clone).
#
#   scripts/demo.sh [--name NAME]     # NAME: the sandbox's name (default: default)
set -euo pipefail
cd "$(dirname "$0")/.."

name=default
while [ $# -gt 0 ]; do
  case "$1" in
    --name) [ $# -ge 2 ] || { echo "demo.sh: --name needs a value" >&2; exit 2; }; name=$2; shift 2 ;;
    *) echo "demo.sh: unknown argument '$1'; usage: scripts/demo.sh [--name NAME]" >&2; exit 2 ;;
  esac
done

started=$EPOCHREALTIME
phase_started=$started
timings=()
# Ends the current phase: prints and keeps how long it took.
phase_done() {
  local now=$EPOCHREALTIME
  local took
  took=$(awk -v a="$phase_started" -v b="$now" 'BEGIN { printf "%.1f", b - a }')
  timings+=("$1" "$took")
  echo "demo: $1 took $took s"
  phase_started=$now
}

bash scripts/setup.sh --demo
phase_done setup
export PATH="$PWD/.venv/bin:$PATH"

gpuprov sandbox up --nodes 2 --name "$name"
inventory=$(gpuprov sandbox inventory --name "$name")
phase_done "sandbox up"

echo
echo "== gpuprov bootstrap $inventory"
gpuprov bootstrap "$inventory"
phase_done bootstrap

echo
echo "== gpuprov check $inventory"
gpuprov check "$inventory"
phase_done check

echo
echo "== gpuprov launch --nodes 2 examples/train_ddp.py"
gpuprov launch -i "$inventory" --nodes 2 examples/train_ddp.py -- --epochs 3
phase_done training

echo
echo "demo: timings"
for ((i = 0; i < ${#timings[@]}; i += 2)); do
  printf '  %-12s %7s s\n' "${timings[i]}" "${timings[i + 1]}"
done
printf '  %-12s %7s s\n' total "$(awk -v a="$started" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')"
down="gpuprov sandbox down"
[ "$name" = default ] || down="$down --name $name"
echo
echo "Done. Remove the sandbox with: .venv/bin/$down"
