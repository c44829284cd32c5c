#!/bin/sh
# Open TCP port ranges in firewalld to the cluster's nodes through one ipset (used by the network_tuning
# role), changing only what differs.
# Usage: firewalld-allow.sh apply|check prune|keep ZONE IPSET PORTS [SOURCE...]
#   prune: the SOURCEs are the whole cluster, entries not among them are removed; keep: some node's addresses
#   could not be read, so nothing is removed (a node left out of a partial list must not be locked out);
#   ZONE: a firewalld zone, or "" for the default zone; IPSET: the ipset's name (type hash:net, so it holds
#   addresses and networks); PORTS: comma-separated ranges, "29400-29599,32768-60999"; SOURCE: IPv4
#   addresses or networks, the ipset's entries (with prune, others are removed from it).
# Per rule "rule source ipset=IPSET port port=PORTS protocol=tcp accept" in ZONE. Rich rules the role's
# previous versions made, one per node and port range ('rule family="ipv4" source address=... port
# port=PORTS protocol="tcp" accept' for these PORTS), are removed, as are ipset rules for other ports.
# Permanent configuration and, when firewalld runs, the running one; firewall-offline-cmd when it does not.
# Prints "changed WHAT" per change (made, or that would be made in check mode) and nothing else on stdout.
# Why a script: the state is read with a handful of firewall-cmd calls, so a re-run that changes nothing
# costs one SSH round trip however large the cluster is.
set -eu
mode=$1
prune=$2
zone=$3
ipset=$4
ports=$5
shift 5

if [ "$mode" != apply ] && [ "$mode" != check ]; then
    echo "firewalld-allow.sh: mode must be apply or check, not '$mode'" >&2
    exit 2
fi
if [ "$prune" != prune ] && [ "$prune" != keep ]; then
    echo "firewalld-allow.sh: the second argument must be prune or keep, not '$prune'" >&2
    exit 2
fi
if ! command -v firewall-cmd >/dev/null 2>&1; then
    # Check mode on a host where firewalld is not installed yet: everything would be added.
    [ "$mode" = check ] || { echo "firewalld-allow.sh: firewall-cmd not found" >&2; exit 1; }
    echo "changed ipset $ipset"
    for source in "$@"; do echo "changed permanent +$source"; done
    echo "$ports" | tr ',' '\n' | while read -r range; do echo "changed permanent rule $range"; done
    exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%s\n' "$@" | sed '/^$/d' | sort -u >"$work/wanted"
echo "$ports" | tr ',' '\n' | sed '/^$/d' | sort -u >"$work/ports"
zone_arg=${zone:+--zone=$zone}

# One pass over one configuration: "permanent" (or the offline one, which is the permanent one) or
# "running". $1 names it; the rest is the firewall-cmd command line that reaches it.
reconcile() {
    what=$1
    shift
    # --info-ipset fails when there is no such ipset; its "entries:" line lists them, space-separated.
    if info=$("$@" --info-ipset="$ipset" 2>/dev/null); then
        type=$(echo "$info" | sed -n 's/^ *type: *//p')
        if [ "$type" != hash:net ]; then
            echo "firewalld-allow.sh: ipset $ipset ($what) has type '$type', not hash:net; remove it" \
                "(firewall-cmd --permanent --delete-ipset=$ipset) and run again" >&2
            exit 1
        fi
        echo "$info" | sed -n 's/^ *entries: *//p' | tr ' ' '\n' | sed '/^$/d' | sort -u >"$work/have"
    elif [ "$what" = running ]; then
        # The running configuration cannot create an ipset: a reload loads it (and the rules using it)
        # from the permanent configuration, which is complete by now. A reload keeps open connections.
        echo "changed running reload"
        [ "$mode" = check ] || "$@" --reload >/dev/null
        return 0
    else
        echo "changed ipset $ipset"
        [ "$mode" = check ] || "$@" --new-ipset="$ipset" --type=hash:net --option=family=inet >/dev/null
        : >"$work/have"
    fi

    comm -23 "$work/wanted" "$work/have" >"$work/add"
    if [ "$prune" = prune ]; then
        comm -13 "$work/wanted" "$work/have" >"$work/remove"
    else
        : >"$work/remove"
    fi
    sed "s/^/changed $what +/" "$work/add"
    sed "s/^/changed $what -/" "$work/remove"
    if [ "$mode" = apply ]; then
        [ -s "$work/add" ] && "$@" --ipset="$ipset" --add-entries-from-file="$work/add" >/dev/null
        [ -s "$work/remove" ] && "$@" --ipset="$ipset" --remove-entries-from-file="$work/remove" >/dev/null
    fi

    # shellcheck disable=SC2086  # zone_arg is empty or one word
    "$@" $zone_arg --list-rich-rules >"$work/rules"
    while read -r range; do
        rule="rule source ipset=\"$ipset\" port port=\"$range\" protocol=\"tcp\" accept"
        grep -qxF "$rule" "$work/rules" && continue
        echo "changed $what rule $range"
        # shellcheck disable=SC2086
        [ "$mode" = check ] || "$@" $zone_arg --add-rich-rule="$rule" >/dev/null
    done <"$work/ports"
    # Rules to remove: this ipset's rules for ports no longer opened, and the previous versions'
    # per-node rules for the ports opened now (the ipset rules replace them).
    while read -r rule; do
        range=$(echo "$rule" | sed -n \
            -e "s/^rule source ipset=\"$ipset\" port port=\"\([0-9-]*\)\" protocol=\"tcp\" accept\$/\1/p")
        if [ -n "$range" ]; then
            grep -qxF "$range" "$work/ports" && continue
        else
            range=$(echo "$rule" | sed -n -e \
                's/^rule family="ipv4" source address="[0-9./]*" port port="\([0-9-]*\)" protocol="tcp" accept$/\1/p')
            [ -n "$range" ] && grep -qxF "$range" "$work/ports" || continue
        fi
        echo "changed $what -rule $rule"
        # shellcheck disable=SC2086
        [ "$mode" = check ] || "$@" $zone_arg --remove-rich-rule="$rule" >/dev/null
    done <"$work/rules"
}

if firewall-cmd --state >/dev/null 2>&1; then
    reconcile permanent firewall-cmd --permanent
    reconcile running firewall-cmd
else
    reconcile permanent firewall-offline-cmd
fi
