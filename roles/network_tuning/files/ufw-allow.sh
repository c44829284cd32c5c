#!/bin/sh
# Allow TCP ports in ufw, adding only the rules it lacks, and turn ufw on (used by the network_tuning role).
# Usage: ufw-allow.sh apply|check enable|keep SOURCE,PORTS,COMMENT...
#   SOURCE: "any" or an IPv4 address or network; PORTS: "22" or a range "29400:29599".
# Prints "ok SOURCE PORTS" or "changed SOURCE PORTS" per rule (changed: added now, or would be in check
# mode), then "changed enable" when ufw was (or would be) turned on.
# Why a script: the rules already there are read from ufw's own rules file in one go, so a re-run that
# changes nothing costs one SSH round trip, not one ufw module run per cluster node and port range.
set -eu
mode=$1
enable=$2
shift 2
rules=/etc/ufw/user.rules
for spec in "$@"; do
    source=${spec%%,*}
    rest=${spec#*,}
    ports=${rest%%,*}
    comment=${rest#*,}
    tuple_source=$source
    [ "$source" = any ] && tuple_source=0.0.0.0/0
    # ufw records each rule as "### tuple ### ACTION PROTO DPORT DST SPORT SRC DIRECTION [comment=HEX]".
    if grep -qF "### tuple ### allow tcp $ports 0.0.0.0/0 any $tuple_source in" "$rules" 2>/dev/null; then
        echo "ok $source $ports"
        continue
    fi
    echo "changed $source $ports"
    [ "$mode" = check ] && continue
    if [ "$source" = any ]; then
        ufw allow proto tcp to any port "$ports" comment "$comment" >/dev/null
    else
        ufw allow proto tcp from "$source" to any port "$ports" comment "$comment" >/dev/null
    fi
done
if [ "$enable" = enable ]; then
    # On: enabled at boot (ufw.conf) and its chains loaded in the running kernel.
    if ! grep -qx 'ENABLED=yes' /etc/ufw/ufw.conf 2>/dev/null || ! iptables -n -L ufw-user-input >/dev/null 2>&1; then
        echo "changed enable"
        [ "$mode" = check ] || ufw --force enable >/dev/null
    fi
fi
