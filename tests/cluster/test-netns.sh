#!/usr/bin/env bash
# test-netns.sh BIN_DIR
#
# ftcoll-launch --hostfile across three fake hosts (network namespaces with their own sshd,
# netns-up.sh), over TCP:
#   1. 12 ranks, 4 per host, exact result;
#   2. the same while one host dies whole (link cut, every process killed, namespace deleted):
#      its ranks are reported failed, the survivors finish every operation consistently;
#   3. an unreachable host and a host that refuses ssh: one-line errors before any rank starts,
#      nothing left running on the hosts that were fine.
# BIN_DIR holds ftcoll-launch. Needs root; exits non-zero on any failed check; tears the hosts
# down whatever happens.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

[[ $# -eq 1 ]] || die "usage: $0 BIN_DIR (holding ftcoll-launch)"
need_root
BIN=$(abs_path "$1")/ftcoll-launch
[[ -x $BIN ]] || die "$BIN not found; cargo build --release -p ftcoll-launcher first"

WORK=$(mktemp -d /tmp/ftc-netns-test.XXXXXX)
STATE=$WORK/hosts
cleanup() {
    "$HERE/netns-down.sh" "$STATE" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
exports=$("$HERE/netns-up.sh" "$STATE" 3) || die "the fake hosts did not come up"
eval "$exports"
export FTCOLL_SSH
PREFIX=${FTC_NET_PREFIX:-10.213.7}
BIND=$PREFIX.1
sed 's/$/ slots=4/' "$STATE/hosts.txt" >"$WORK/hostfile"

json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
check() {
    if [[ $2 == True ]]; then note "ok: $1"; else die "FAILED: $1"; fi
}
agents_on_hosts() {
    local n=0 ns
    for ns in $(ip netns list | awk '/^ftc-h/ {print $1}'); do
        n=$((n + $(ip netns pids "$ns" | xargs -r -n1 -I{} cat /proc/{}/cmdline 2>/dev/null | tr '\0' ' ' | grep -c "__agent" || true)))
    done
    echo "$n"
}

note "1. 12 ranks on 3 hosts"
timeout 120 "$BIN" -n 12 --hostfile "$WORK/hostfile" --bind "$BIND" --algo rdb --input int --ops 20 \
    --no-tui --json "$WORK/rdb.json" >"$WORK/rdb.out" 2>&1 || { cat "$WORK/rdb.out" >&2; die "FAILED: the job did not succeed"; }
check "started over ssh on 3 hosts, over TCP" "$(json "$WORK/rdb.json" "d['launch'] == 'ssh' and d['hosts'] == 3 and d['transport'] == 'tcp'")"
check "exact sum at every rank" "$(json "$WORK/rdb.json" "d['exact'] and d['ops_ok_all_ranks'] == 20 and not d['failures']")"

note "2. host 3 (ranks 8-11) dies mid-run"
timeout 180 "$BIN" -n 12 --hostfile "$WORK/hostfile" --bind "$BIND" --algo ftco-allreduce \
    --detect-timeout 400ms --input int --ops 5000 --suspect-ms 2000 --no-tui \
    --json "$WORK/kill.json" >"$WORK/kill.out" 2>&1 &
job=$!
# Bounded: wait until every rank of host 3 runs there, then kill the host a moment later.
for _ in $(seq 1 100); do
    [[ $(ip netns pids ftc-h3 2>/dev/null | wc -l) -ge 6 ]] && break
    sleep 0.1
done
sleep 1
"$HERE/netns-kill-host.sh" "$STATE" h3 >/dev/null
status=0
wait "$job" || status=$?
[[ $status -eq 0 ]] || { cat "$WORK/kill.out" >&2; die "FAILED: the survivors' job did not succeed (status $status)"; }
note "   failures: $(json "$WORK/kill.json" "'; '.join(f\"{f['rank']} {f['how']} at {f['at_s']:.2f}s\" for f in d['failures'])")"
check "host 3's ranks reported failed" "$(json "$WORK/kill.json" "{8, 9, 10, 11} <= {f['rank'] for f in d['failures']}")"
# FTCO's own timeouts can take a live but late rank for dead (12 ranks share this VM's two cores
# with sshd): the launcher then kills it before anyone excludes it. Any other failure must be one.
check "any other rank failed only by being fenced as a suspect" \
    "$(json "$WORK/kill.json" "all(f['cause'] == 'suspected' for f in d['failures'] if f['rank'] not in (8, 9, 10, 11))")"
check "the survivors finished every operation, consistently and exactly" \
    "$(json "$WORK/kill.json" "d['ops_ok_all_survivors'] == d['ops'] and d['consistent'] and d['exact']")"

note "3. unreachable and refusing hosts"
printf '%s.11 slots=4\n%s.99 slots=4\n' "$PREFIX" "$PREFIX" >"$WORK/unreachable"
set +e
timeout 60 "$BIN" -n 8 --hostfile "$WORK/unreachable" --bind "$BIND" --no-tui >"$WORK/unreach.out" 2>&1
status=$?
set -e
check "an unreachable host fails the job" "$([[ $status -ne 0 ]] && echo True || echo False)"
check "with a one-line error naming the host" \
    "$(tail -n1 "$WORK/unreach.out" | grep -q "cannot start the node agent on host $PREFIX.99" && echo True || echo False)"
# The bridge address answers, but nothing listens for ssh there: refused.
printf '%s.11 slots=4\n%s.1 slots=4\n' "$PREFIX" "$PREFIX" >"$WORK/refusing"
set +e
timeout 60 "$BIN" -n 8 --hostfile "$WORK/refusing" --bind "$BIND" --no-tui >"$WORK/refuse.out" 2>&1
status=$?
set -e
check "a refusing host fails the job" "$([[ $status -ne 0 ]] && echo True || echo False)"
check "with a one-line error naming the host" \
    "$(tail -n1 "$WORK/refuse.out" | grep -q "cannot start the node agent on host $PREFIX.1:" && echo True || echo False)"
sleep 0.5
check "no agent left on the hosts that were fine" "$([[ $(agents_on_hosts) -eq 0 ]] && echo True || echo False)"
note "all hostfile checks passed"
