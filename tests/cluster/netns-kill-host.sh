#!/usr/bin/env bash
# netns-kill-host.sh STATE_DIR NAME
#
# Simulate the sudden death (power loss) of one fake host created by
# netns-up.sh, to test how ftcoll reacts to a whole host disappearing.
# NAME is the namespace (ftc-h2), the short form (h2 or 2) or its IP.
#
# Order matters, as with a real power cut peers must see silence, not a TCP
# RST or FIN from a dying kernel:
#   1. pin the host's IP -> MAC in the neighbour (ARP) tables of the root
#      namespace and of the surviving hosts (nud permanent), so peers keep
#      sending frames into the void and connections *time out*; without this
#      ARP fails after a few seconds and connect() returns EHOSTUNREACH
#      ("No route to host") instead. FTC_KILL_PIN_NEIGH=0 skips the pinning.
#   2. cut the link: delete its veth pair (both ends go at once);
#   3. SIGKILL every process in the namespace (ip netns pids): its sshd and
#      everything started over ssh there;
#   4. delete the namespace.
# Idempotent: killing a host that is already dead succeeds. netns-down.sh
# cleans up the rest (the pinned entries vanish with the bridge/namespaces).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

[[ $# -eq 2 ]] || die "usage: $0 STATE_DIR NAME (ftc-hK, hK, K or IP)"
need_root
need_cmd ip

S=$(abs_path "$1")
[[ -f $S/.ftcoll-netns && -f $S/netns.env ]] || die "'$S' is not a netns-up.sh state dir"
# shellcheck disable=SC1090,SC1091
source "$S/netns.env"   # PREFIX, BRIDGE, NAMES

arg=$2
case "$arg" in
    ftc-h[0-9]*) name=$arg ;;
    h[0-9]*) name=ftc-$arg ;;
    [0-9] | [0-9][0-9]) name=ftc-h$arg ;;
    "$PREFIX".*)
        last=${arg##*.}
        [[ $last =~ ^[0-9]+$ ]] && ((last > 10)) || die "IP '$arg' is not a fake host"
        name=ftc-h$((last - 10))
        ;;
    *) die "cannot parse host '$arg' (use ftc-hK, hK, K or $PREFIX.(10+K))" ;;
esac
k=${name#ftc-h}
[[ " $NAMES " == *" $name "* ]] || die "no host '$name' in $S (hosts: $NAMES)"
ipaddr=$PREFIX.$((10 + k))

if [[ ! -e /run/netns/$name ]]; then
    note "$name ($ipaddr) is already dead"
    exit 0
fi

# 1. Pin neighbour entries while the MAC is still known.
if [[ ${FTC_KILL_PIN_NEIGH:-1} != 0 ]]; then
    link=$(ip -n "$name" -o link show dev eth0 2>/dev/null || true)
    mac=$(sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p' <<<"$link")
    if [[ -n $mac ]]; then
        ip neigh replace "$ipaddr" lladdr "$mac" dev "$BRIDGE" nud permanent 2>/dev/null ||
            note "warning: could not pin $ipaddr in the root namespace"
        for other in $NAMES; do
            [[ $other != "$name" && -e /run/netns/$other ]] || continue
            ip -n "$other" neigh replace "$ipaddr" lladdr "$mac" dev eth0 nud permanent 2>/dev/null ||
                note "warning: could not pin $ipaddr in $other"
        done
    else
        note "warning: $name has no eth0 any more; not pinning its neighbour entries"
    fi
fi

# 2. Cut the link (deleting one end of a veth pair deletes both).
ip link del "$name-v" 2>/dev/null || true
ip -n "$name" link del eth0 2>/dev/null || true

# 3. Kill everything inside, bounded wait.
ns_empty() { [[ -z $(ip netns pids "$name" 2>/dev/null) ]]; }
pids=$(ip netns pids "$name" 2>/dev/null || true)
# shellcheck disable=SC2086
[[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
wait_until 10 ns_empty ||
    die "processes still alive in $name 10 s after SIGKILL: $(ip netns pids "$name" | tr '\n' ' ')"

# 4. Delete the namespace.
ip netns del "$name"
# shellcheck disable=SC2086
wait_until 5 all_reaped $pids || note "note: some killed processes of $name not yet reaped by PID 1"
rm -f -- "$S/sshd-$name.pid"
echo "$ipaddr" >>"$S/dead.txt"
note "host $name ($ipaddr) killed: link cut, $(wc -w <<<"$pids") processes SIGKILLed, namespace deleted"
