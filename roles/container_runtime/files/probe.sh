#!/bin/sh
# The container_runtime role's verify probe: probe.sh ENGINE IMAGE MODE FLAGS GPU_FLAGS
# (MODE: quick or deep; FLAGS: the flags of every container, GPU_FLAGS: the jobs' GPU flags, each a
# space-separated list). Makes a tiny image from the host's own echo, sleep and their libraries (no registry,
# no download). quick: one container, `nvidia-smi -L` inside with the GPU flags on a GPU host, else echo.
# deep: also keeps containers running across `systemctl daemon-reload` (the trap of
# nvidia-container-toolkit#48) and reads their GPUs after it. Prints key=value lines; removes its containers
# and image whatever happens.
set -eu
engine=$1 image=$2 mode=$3 flags=$4 gpu_flags=$5
name="gpuprov-runtime-probe-$$"
gpu_name="gpuprov-runtime-probe-gpu-$$"
cleanup() {
    "$engine" rm -f "$name" "$gpu_name" >/dev/null 2>&1 || true
    "$engine" rmi "$image" >/dev/null 2>&1 || true
}
trap cleanup EXIT
bins="/usr/bin/echo /usr/bin/sleep"
smi=""
# A GPU host: the driver's control device exists (the sandbox's stand-in driver has nvidia-smi, no device).
if [ -x /usr/bin/nvidia-smi ] && [ -c /dev/nvidiactl ]; then smi=/usr/bin/nvidia-smi; fi
# The libraries of those programs (nvidia-smi's too, but not NVIDIA's own: the toolkit injects those).
libs=$(ldd $bins $smi 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' \
       | grep -v '/libnvidia' | sort -u)
# shellcheck disable=SC2046
tar -C / -ch $(for f in $bins $libs; do echo "${f#/}"; done) | "$engine" import - "$image" >/dev/null
token=$(cat /proc/sys/kernel/random/uuid)
echo "token=$token"
# shellcheck disable=SC2086
if [ -n "$smi" ]; then
    echo "host_gpus=$(nvidia-smi -L | sort | paste -sd'|' -)"
    echo "container_gpus=$("$engine" run --rm $flags $gpu_flags "$image" nvidia-smi -L | sort | paste -sd'|' -)"
fi
[ "$mode" = deep ] || [ -z "$smi" ] || exit 0
# shellcheck disable=SC2086
echo "echo=$("$engine" run --rm --network host $flags "$image" /usr/bin/echo "$token")"
[ "$mode" = deep ] || exit 0
# shellcheck disable=SC2086
"$engine" run -d --name "$name" --network host $flags "$image" /usr/bin/sleep 600 >/dev/null
pid=$("$engine" inspect --format '{{.State.Pid}}' "$name")
echo "cgroup=$(grep -m1 -E '^[0-9]+:(devices)?:' "/proc/$pid/cgroup" | cut -d: -f3)"
# shellcheck disable=SC2086
[ -z "$smi" ] || "$engine" run -d --name "$gpu_name" $flags $gpu_flags "$image" /usr/bin/sleep 600 >/dev/null
systemctl daemon-reload
sleep 1
echo "after_reload=$("$engine" inspect --format '{{.State.Status}}' "$name")"
echo "exec_after_reload=$("$engine" exec "$name" /usr/bin/echo "$token")"
if [ -n "$smi" ]; then
    echo "gpus_after_reload=$("$engine" exec "$gpu_name" nvidia-smi -L 2>&1 | sort | paste -sd'|' -)"
fi
