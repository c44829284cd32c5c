#!/bin/sh
# Print "<loaded NVIDIA driver version or none> <nouveau loaded: yes|no>".
# Arguments (for tests): the driver's version file and nouveau's module directory.
#
# The first line of /proc/driver/nvidia/version names the module flavour before the version, so the version
# is the first dotted number after "Kernel Module" and an optional "for <arch>". Recorded real lines
# (tests/recorded/proc-driver-nvidia-version/ keeps them with their sources):
#   proprietary: NVRM version: NVIDIA UNIX x86_64 Kernel Module  384.98  Thu Oct 26 15:16:01 PDT 2017
#   open:        NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build  (...)
#   open, Arm:   NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  Release Build  (...)
# NVIDIA's open module README ("kernel_open.html") documents the two prefixes; the arch after "for" is
# TARGET_ARCH of open-gpu-kernel-modules' utils.mk, one word.
version_file=${1:-/proc/driver/nvidia/version}
nouveau_dir=${2:-/sys/module/nouveau}

loaded=$(sed -n -E 's/^NVRM version: .*Kernel Module( for [^ ]+)? +([0-9]+(\.[0-9]+)+)( .*)?$/\2/p' \
  "$version_file" 2>/dev/null | head -n 1)
if [ -d "$nouveau_dir" ]; then nouveau=yes; else nouveau=no; fi
echo "${loaded:-none} $nouveau"
