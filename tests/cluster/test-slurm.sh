#!/usr/bin/env bash
# test-slurm.sh BIN_DIR
#
# ftcoll-launch inside a Slurm allocation, on a private one-node Slurm cluster (slurm-up.sh):
#   1. `salloc -n8 ftcoll-launch -n 8` starts the ranks with srun (node agents), exact result;
#   2. the same with a rank SIGKILLed mid-loop: reported, the survivors finish, the step lives;
#   3. a user program started by srun directly, without the launcher, fails with one line that
#      says to use the launcher.
# BIN_DIR holds ftcoll-launch and examples/allreduce (cargo build --release -p ftcoll-launcher
# --example allreduce). Needs root; exits non-zero on any failed check; tears the cluster down
# whatever happens.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

[[ $# -eq 1 ]] || die "usage: $0 BIN_DIR (holding ftcoll-launch and examples/allreduce)"
need_root
BIN=$(abs_path "$1")
[[ -x $BIN/ftcoll-launch ]] || die "$BIN/ftcoll-launch not found; cargo build --release -p ftcoll-launcher first"
[[ -x $BIN/examples/allreduce ]] || die "$BIN/examples/allreduce not found; cargo build --release -p ftcoll-launcher --example allreduce"

WORK=$(mktemp -d /tmp/ftc-slurm-test.XXXXXX)
chmod 755 "$WORK"
STATE=$WORK/cluster
cleanup() {
    "$HERE/slurm-down.sh" "$STATE" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
exports=$("$HERE/slurm-up.sh" "$STATE") || die "the Slurm cluster did not come up"
eval "$exports"
export SLURM_CONF

json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
check() { # check DESCRIPTION CONDITION-OUTPUT(True/False)
    if [[ $2 == True ]]; then note "ok: $1"; else die "FAILED: $1"; fi
}

note "1. salloc -n8 ftcoll-launch -n 8 --algo rdb"
timeout 120 salloc -N1 -n8 "$BIN/ftcoll-launch" -n 8 --algo rdb --input int --ops 20 --no-tui \
    --json "$WORK/rdb.json" >"$WORK/rdb.out" 2>&1 || { cat "$WORK/rdb.out" >&2; die "FAILED: the job did not succeed"; }
check "ranks started by srun on the allocation's node" "$(json "$WORK/rdb.json" "d['launch'] == 'srun' and d['hosts'] == 1")"
check "exact sum at every rank, no failures" "$(json "$WORK/rdb.json" "d['exact'] and d['ops_ok_all_ranks'] == 20 and not d['failures']")"

note "2. a rank killed mid-loop (ftco-allreduce)"
timeout 120 salloc -N1 -n8 "$BIN/ftcoll-launch" -n 8 --algo ftco-allreduce --detect-timeout 50ms \
    --input int --ops 2000 --fault kill:rank=3,at=150ms --no-tui \
    --json "$WORK/kill.json" >"$WORK/kill.out" 2>&1 || { cat "$WORK/kill.out" >&2; die "FAILED: the job did not succeed"; }
check "rank 3 reported failed, and only it" "$(json "$WORK/kill.json" "[f['rank'] for f in d['failures']] == [3]")"
check "every survivor finished every operation, consistently and exactly" \
    "$(json "$WORK/kill.json" "d['ops_ok_all_survivors'] == 2000 and d['consistent'] and d['exact']")"

note "3. srun without the launcher"
set +e
timeout 60 salloc -N1 -n2 srun -n2 "$BIN/examples/allreduce" 10 >"$WORK/direct.out" 2>&1
status=$?
set -e
check "a direct srun of a user program fails" "$([[ $status -ne 0 ]] && echo True || echo False)"
check "with one line that says to start it with the ftcoll launcher" \
    "$(grep -q 'not by the ftcoll launcher; inside the allocation start the program with the launcher' "$WORK/direct.out" && echo True || echo False)"
note "all Slurm checks passed"
