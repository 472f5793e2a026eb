#!/usr/bin/env bash
# selftest.sh [WORK_DIR]
#
# End-to-end check of the cluster test scripts on this machine: brings up the
# single-node Slurm cluster and the netns/ssh fake hosts, runs the checks that
# tests/cluster/NOTES.md relies on (srun/salloc behaviour, PMI2 environment,
# ssh into each fake host, connect-back to the launcher address, host kill
# gives timeouts), tears everything down and verifies nothing is left.
# Why: the facts in NOTES.md are only worth something if they can be
# re-checked after a Slurm/OpenSSH/kernel change. Exit status 0 iff all
# checks passed. WORK_DIR defaults to /tmp/ftc-selftest.PID (removed at end).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

need_root
W=$(abs_path "${1:-/tmp/ftc-selftest.$$}")
guard_state_dir "$W"
[[ ! -e $W || -z $(ls -A "$W" 2>/dev/null) ]] || die "WORK_DIR '$W' is not empty"
mkdir -p "$W"
chmod 755 "$W"   # munged needs o+x on every parent of its socket
SL=$W/slurm
NET=$W/net
HTTP_PID=""
FAILS=0

teardown() {
    [[ -z $HTTP_PID ]] || kill "$HTTP_PID" 2>/dev/null || true
    "$HERE/slurm-down.sh" "$SL" || true
    "$HERE/netns-down.sh" "$NET" || true
    rmdir "$W" 2>/dev/null || true
}
trap teardown EXIT

pass() { echo "PASS: $*"; }
fail() {
    echo "FAIL: $*"
    FAILS=$((FAILS + 1))
}
# check DESCRIPTION CMD...: run CMD, report PASS/FAIL, never abort the run.
check() {
    local what=$1
    shift
    if "$@"; then pass "$what"; else fail "$what"; fi
}

########################################################################
echo "### Slurm"
line=$("$HERE/slurm-up.sh" "$SL")
eval "$line"
NODE=$(hostname -s)
cd "$W"

out=$(timeout 60 salloc -Q -N1 -n8 srun -n8 hostname 2>&1) || true
check "salloc -N1 -n8 srun -n8 hostname gives 8 x $NODE" \
    test "$(grep -cx "$NODE" <<<"$out")" -eq 8

alloc_env=$(timeout 60 salloc -Q -n4 bash -c 'env | grep ^SLURM_ | sort' 2>&1) || true
echo "--- SLURM_* inside salloc -n4:"
sed 's/^/    /' <<<"$alloc_env"
for v in SLURM_JOB_ID= SLURM_JOB_NODELIST=$NODE SLURM_NNODES=1 SLURM_JOB_CPUS_PER_NODE=4 \
    SLURM_NTASKS=4 SLURM_TASKS_PER_NODE=4 SLURM_CONF=$SLURM_CONF; do
    check "salloc env has $v" grep -q "^$v" <<<"$alloc_env"
done

mpis=$(timeout 30 srun --mpi=list 2>&1) || true
check "srun --mpi=list lists pmi2" grep -qw pmi2 <<<"$mpis"

pmi=$(timeout 60 srun --mpi=pmi2 -n2 -l env 2>&1 | grep 'PMI' | sort) || true
echo "--- PMI variables under srun --mpi=pmi2 -n2:"
sed 's/^/    /' <<<"$pmi"
for v in '0: PMI_RANK=0' '1: PMI_RANK=1' '0: PMI_SIZE=2' '0: PMI_FD=' '0: PMI_JOBID='; do
    check "pmi2 task env has '$v'" grep -q "^$v" <<<"$pmi"
done

# One task SIGKILLed; with -K0 the others must finish normally.
# shellcheck disable=SC2016
victim='if [ $SLURM_PROCID = 1 ]; then kill -9 $$; fi; sleep 3; echo survived $SLURM_PROCID'
out=$(timeout 60 srun -n3 -K0 bash -c "$victim" 2>&1) || true
echo "--- srun -n3 -K0 with task 1 SIGKILLed:"
sed 's/^/    /' <<<"$out"
check "-K0: tasks 0 and 2 survive task 1's SIGKILL" \
    bash -c 'grep -qx "survived 0" <<<"$1" && grep -qx "survived 2" <<<"$1" && ! grep -q "survived 1" <<<"$1"' _ "$out"
out=$(timeout 60 srun -n3 -K1 bash -c "$victim" 2>&1) || true
check "-K1: the whole step is killed" bash -c '! grep -q survived <<<"$1"' _ "$out"

t0=$SECONDS
timeout 60 salloc -Q -n2 bash -c 'srun -n2 sleep 4 & sleep 1; srun --overlap -n1 true; echo "$SECONDS" >overlap.t; wait' >/dev/null 2>&1 || true
check "--overlap: a second step starts while the first holds every CPU" \
    test "$(cat overlap.t 2>/dev/null || echo 99)" -lt 4
rm -f overlap.t
cd /
"$HERE/slurm-down.sh" "$SL"
unset SLURM_CONF
left=$(pgrep -a -f "$SL/" || true)
check "no process refers to $SL after slurm-down" test -z "$left"

########################################################################
echo "### netns + ssh"
line=$("$HERE/netns-up.sh" "$NET" 4)
eval "$line"
read -r -a SSH <<<"$FTCOLL_SSH"
# ssh reads stdin: never feed it the hosts list (hence mapfile, and -n/</dev/null).
mapfile -t HOSTS <"$NET/hosts.txt"
check "hosts.txt lists 4 hosts" test "${#HOSTS[@]}" -eq 4
k=0
for ip in "${HOSTS[@]}"; do
    k=$((k + 1))
    got=$(timeout 20 "${SSH[@]}" "$ip" 'hostname; ip -4 -o addr show dev eth0' 2>&1 </dev/null) || true
    check "ssh $ip: hostname ftc-h$k and address $ip/24" \
        bash -c '[[ $1 == "ftc-h$2"* && $1 == *"$3/24"* ]]' _ "$got" "$k" "$ip"
done

PREFIX=$(sed -n 's/^PREFIX=//p' "$NET/netns.env")
port=18080
[[ -z $(ss -Htln "sport = :$port") ]] || die "port $port busy"
python3 -m http.server --bind "$PREFIX.1" "$port" --directory "$W" >/dev/null 2>&1 &
HTTP_PID=$!
up() { timeout 2 bash -c "exec 3<>/dev/tcp/$PREFIX.1/$port" 2>/dev/null; }
wait_until 10 up || die "http.server on $PREFIX.1:$port did not start"
for ip in "${HOSTS[@]}"; do
    code=$(timeout 20 "${SSH[@]}" "$ip" "curl -s -o /dev/null -w '%{http_code}' http://$PREFIX.1:$port/" 2>&1 </dev/null) || true
    check "process on $ip connects back to $PREFIX.1:$port" test "$code" = 200
done
kill "$HTTP_PID"
wait "$HTTP_PID" 2>/dev/null || true
HTTP_PID=""

banner=$(timeout 20 "${SSH[@]}" "$PREFIX.11" "exec 3<>/dev/tcp/$PREFIX.12/22 && head -c 7 <&3" 2>&1) || true
check "host .11 reaches host .12 (ssh banner '$banner')" test "$banner" = SSH-2.0
check "/work is visible inside the namespaces" timeout 20 "${SSH[@]}" "$PREFIX.11" test -x "$HERE/netns-up.sh"

# Host kill: a session into h2 must not see an EOF/RST; new connects time out.
"${SSH[@]}" "$PREFIX.12" 'sleep 300' </dev/null >/dev/null 2>&1 &
sess=$!
sleep 2
t0=$SECONDS
"$HERE/netns-kill-host.sh" "$NET" h2
timeout 5 bash -c "exec 3<>/dev/tcp/$PREFIX.12/22" 2>/dev/null && rc=0 || rc=$?
check "after kill, connect from root namespace to .12 times out (rc $rc, want 124)" test "$rc" -eq 124
rc=$(timeout 20 "${SSH[@]}" "$PREFIX.11" "timeout 5 bash -c 'exec 3<>/dev/tcp/$PREFIX.12/22' 2>/dev/null; echo \$?" 2>&1) || true
check "after kill, connect from .11 to .12 times out (rc $rc, want 124)" test "$rc" = 124
check "namespace ftc-h2 is gone" test ! -e /run/netns/ftc-h2
sess_done() { ! kill -0 "$sess" 2>/dev/null; }
wait_until 40 sess_done || kill "$sess" 2>/dev/null || true
wait "$sess" 2>/dev/null && src=0 || src=$?
check "ssh session into the dead host ends (rc $src) after $((SECONDS - t0)) s via ServerAlive" test "$src" -eq 255
check "killing an already dead host succeeds" "$HERE/netns-kill-host.sh" "$NET" "$PREFIX.12"

"$HERE/netns-down.sh" "$NET"
check "no ftc-* namespaces left" bash -c '! ip netns list | grep -q "^ftc-"'
check "no ftc-* links left" bash -c '! ip -o link | grep -q ": ftc-"'
left=$(pgrep -a -f "$NET/" || true)
check "no process refers to $NET after netns-down" test -z "$left"

echo "### $FAILS check(s) failed"
((FAILS == 0))
