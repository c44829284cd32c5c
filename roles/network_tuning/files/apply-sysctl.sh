#!/bin/sh
# Set kernel parameters one by one and say what happened to each (used by the network_tuning role).
# Usage: apply-sysctl.sh apply|check KEY=VALUE...
# Prints one line per key: "ok KEY" (already set), "changed KEY" (set now, or would be in check mode),
# "unsettable KEY: REASON" (the kernel has no such key here, or refused it).
set -u
mode=$1
shift
normalise() {
    tr '\t' ' ' | tr -s ' ' | sed 's/^ //; s/ $//'
}
for pair in "$@"; do
    key=${pair%%=*}
    want=$(printf '%s' "${pair#*=}" | normalise)
    # Dots separate the key's parts and a "/" stands for a dot inside one (an interface named ib0.8001),
    # as sysctl.d(5) and procps' sysctl read them.
    path=/proc/sys/$(printf '%s' "$key" | tr './' '/.')
    if [ ! -e "$path" ]; then
        echo "unsettable $key: the kernel has no such key here"
        continue
    fi
    have=$(normalise < "$path")
    if [ "$have" = "$want" ]; then
        echo "ok $key"
    elif [ "$mode" = check ]; then
        if [ -w "$path" ]; then
            echo "changed $key"
        else
            echo "unsettable $key: read-only (is $have)"
        fi
    else
        # procps' sysctl exits 0 on some refusals (EINVAL): the value read back is what counts.
        error=$(sysctl -q -w "$key=$want" 2>&1 | tail -n 1)
        if [ "$(normalise < "$path")" = "$want" ]; then
            echo "changed $key"
        else
            echo "unsettable $key: ${error:-the kernel kept its value} (is $have)"
        fi
    fi
done
