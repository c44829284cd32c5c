#!/bin/sh
# Print each NVIDIA PCI function as "SLOT VENDOR DEVICE CLASS" (sysfs, read-only; no driver needed): what
# gpuprov checks the lock's GPU generation against (gpuprov/gpu_generations.py keeps the GPU classes).
for dev in /sys/bus/pci/devices/*; do
    [ -r "$dev/vendor" ] || continue
    [ "$(cat "$dev/vendor")" = 0x10de ] || continue
    printf '%s %s %s %s\n' "${dev##*/}" 0x10de "$(cat "$dev/device" 2>/dev/null || echo unknown)" \
        "$(cat "$dev/class" 2>/dev/null || echo unknown)"
done
exit 0
