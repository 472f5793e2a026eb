#!/usr/bin/env bash
# netns-down.sh [--keep-state-dir] STATE_DIR
#
# Tear down the fake hosts created by netns-up.sh STATE_DIR: SIGKILL every
# process inside the ftc-hK namespaces (their sshd and anything started over
# ssh), delete the namespaces, their veths and the bridge, remove /run/sshd if
# netns-up.sh created it, and remove STATE_DIR (unless --keep-state-dir, which
# netns-up.sh uses to clean up after a failed start while keeping the logs).
# Idempotent: succeeds when everything is already gone. If STATE_DIR/netns.env
# is missing it falls back to the fixed names (ftc-h<N>, ftc-h<N>-v, ftc-br0),
# which only these scripts create.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

KEEP=0
if [[ ${1:-} == --keep-state-dir ]]; then
    KEEP=1
    shift
fi
[[ $# -eq 1 ]] || die "usage: $0 [--keep-state-dir] STATE_DIR"
need_root
need_cmd ip

S=$(abs_path "$1")
guard_state_dir "$S"
if [[ -e $S && ! -f $S/.ftcoll-netns ]]; then
    die "refusing to touch '$S': no .ftcoll-netns marker (not created by netns-up.sh)"
fi

BRIDGE=ftc-br0
NAMES=""
if [[ -f $S/netns.env ]]; then
    # shellcheck disable=SC1091
    source "$S/netns.env"
fi
# Without netns.env (STATE_DIR gone or setup interrupted early), fall back to
# any leftover ftc-h<N> namespace, unless its sshd shows that it belongs to
# another, still existing, state dir.
if [[ ! -f $S/netns.env ]]; then
    for name in $(ip netns list | awk '{print $1}' | grep -E '^ftc-h[0-9]+$' || true); do
        for p in $(ip netns pids "$name" 2>/dev/null || true); do
            cmd=$(tr '\0' ' ' 2>/dev/null </proc/"$p"/cmdline) || continue
            [[ $cmd =~ -f\ ([^ ]+)/sshd_config ]] || continue
            owner=${BASH_REMATCH[1]}
            if [[ $owner != "$S" && -f $owner/.ftcoll-netns ]]; then
                die "$name belongs to $owner; run netns-down.sh $owner"
            fi
        done
        NAMES="$NAMES $name"
    done
fi
NAMES=$(tr ' ' '\n' <<<"$NAMES" | grep -v '^$' | sort -u || true)

ns_exists() { [[ -e /run/netns/$1 ]]; }
ns_empty() { [[ -z $(ip netns pids "$1" 2>/dev/null) ]]; }

for name in $NAMES; do
    if ns_exists "$name"; then
        # Cut the link first so nothing dying in there reaches the peers.
        ip link del "$name-v" 2>/dev/null || true
        pids=$(ip netns pids "$name" 2>/dev/null || true)
        # shellcheck disable=SC2086
        [[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
        wait_until 10 ns_empty "$name" || note "warning: processes still in $name after SIGKILL: $(ip netns pids "$name" | tr '\n' ' ')"
        ip netns del "$name" 2>/dev/null || true
        # shellcheck disable=SC2086
        wait_until 5 all_reaped $pids || note "note: some killed processes of $name not yet reaped by PID 1"
    fi
    ip link del "$name-v" 2>/dev/null || true
    # An sshd whose namespace was already deleted (should not happen).
    [[ ! -d $S ]] || kill_pidfile "$S/sshd-$name.pid" sshd 2
done
wait_reaped

HAD_BRIDGE=0
if ip link show "$BRIDGE" >/dev/null 2>&1; then
    HAD_BRIDGE=1
    ip link del "$BRIDGE"
fi

# Namespace destruction is asynchronous in the kernel; wait (bounded) until
# the links are really gone so a following netns-up.sh does not collide.
links_gone() {
    local n
    ip link show "$BRIDGE" >/dev/null 2>&1 && return 1
    for n in $NAMES; do
        ip link show "$n-v" >/dev/null 2>&1 && return 1
    done
    return 0
}
wait_until 10 links_gone || die "links still present 10 s after deletion: $(ip -br link | grep -E "^($BRIDGE|ftc-h)" | awk '{print $1}' | tr '\n' ' ')"

if [[ -f $S/created-run-sshd ]]; then
    rmdir /run/sshd 2>/dev/null || true
    rm -f "$S/created-run-sshd"
fi

if ((KEEP == 0)); then
    if [[ -z $NAMES && $HAD_BRIDGE == 0 && ! -e $S ]]; then
        note "nothing to do: no fake hosts and no $S"
        exit 0
    fi
    rm -rf -- "$S"
    note "fake hosts removed and $S deleted"
else
    note "fake hosts removed; $S kept"
fi
