#!/bin/sh
# The IPv4 networks of the network interfaces of the host's RDMA NICs (used by the network_tuning role), to
# find several RDMA NICs in one subnet: those need per-interface ARP and reverse-path settings.
# Usage: rdma-netdevs.sh [SYSFS_INFINIBAND_DIR]   (default /sys/class/infiniband)
# Prints "NETDEV NETWORK/PREFIX shared|alone" per global IPv4 address of each such interface: "shared" when
# another of these interfaces has an address in the same network. Nothing when there is none.
# The interfaces: each RDMA device's PCI function's (device/net/*: IPoIB and RoCE ports) and the one behind
# each of its GIDs (ports/*/gid_attrs/ndevs/*: also RoCE over a bond or a VLAN), as the kernel's
# Documentation/ABI/stable/sysfs-class-infiniband describes them.
set -u
dir=${1:-/sys/class/infiniband}
netdevs=$(
    {
        for net in "$dir"/*/device/net/*; do
            [ -e "$net" ] && echo "${net##*/}"
        done
        # An unused GID's ndevs entry cannot be read (EINVAL): nothing to say about it.
        cat "$dir"/*/ports/*/gid_attrs/ndevs/* 2>/dev/null
    } | sed '/^$/d' | sort -u
)
[ -n "$netdevs" ] || exit 0
# `ip -o`: one line per address, the interface's name in field 2 and ADDRESS/PREFIX in field 4.
ip -o -4 addr show scope global | awk -v netdevs="$netdevs" '
BEGIN { n = split(netdevs, names, "\n"); for (i = 1; i <= n; i++) rdma[names[i]] = 1 }
$2 in rdma {
    split($4, a, "/"); split(a[1], o, ".")
    size = 2 ^ (32 - a[2])
    net = int((((o[1] * 256 + o[2]) * 256 + o[3]) * 256 + o[4]) / size) * size
    network = sprintf("%d.%d.%d.%d/%d", int(net / 16777216) % 256, int(net / 65536) % 256,
                      int(net / 256) % 256, net % 256, a[2])
    found[++count] = $2 " " network
    if (!(($2, network) in seen)) { seen[$2, network] = 1; interfaces[network]++ }
}
END {
    for (i = 1; i <= count; i++) {
        split(found[i], f, " ")
        print found[i], (interfaces[f[2]] > 1 ? "shared" : "alone")
    }
}'
