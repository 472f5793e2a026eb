#!/usr/bin/env bash
# slurm-down.sh STATE_DIR
#
# Tear down the cluster started by slurm-up.sh STATE_DIR: cancel its jobs,
# stop exactly the slurmd, slurmctld and munged whose pids slurm-up.sh
# recorded (pid files in STATE_DIR), kill any slurmstepd left by that slurmd,
# then remove STATE_DIR. Idempotent: succeeds when things are already down or
# STATE_DIR no longer exists, so tests can call it unconditionally.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

[[ $# -eq 1 ]] || die "usage: $0 STATE_DIR"
need_root

S=$(abs_path "$1")
guard_state_dir "$S"
if [[ ! -e $S ]]; then
    note "$S does not exist; nothing to do"
    exit 0
fi
[[ -f $S/.ftcoll-slurm ]] || die "refusing to touch '$S': no .ftcoll-slurm marker (not created by slurm-up.sh)"

CONF=$S/etc/slurm.conf

# slurmstepd processes of *this* cluster: they inherit SLURM_CONF=$CONF from
# our slurmd, which distinguishes them from any other Slurm on the machine.
our_stepds() {
    local p env
    for p in $(pgrep -x slurmstepd 2>/dev/null || true); do
        env=$(tr '\0' '\n' 2>/dev/null <"/proc/$p/environ") || continue
        if grep -qxF "SLURM_CONF=$CONF" <<<"$env"; then
            echo "$p"
        fi
    done
}
no_stepds() { [[ -z $(our_stepds) ]]; }

# descendants PID: all processes below PID (the tasks of a slurmstepd).
descendants() {
    local c
    for c in $(pgrep -P "$1" 2>/dev/null || true); do
        echo "$c"
        descendants "$c"
    done
}

# 1. Cancel running jobs while the controller is still up (bounded).
if [[ -f $CONF && -f $S/run/slurmctld.pid ]] && pid_alive "$(cat "$S/run/slurmctld.pid")" slurmctld; then
    SLURM_CONF=$CONF timeout 10 scancel --quiet --full --partition=debug 2>/dev/null || true
    wait_until 15 no_stepds || note "slurmstepd still running 15 s after scancel; killing"
fi

# 2. Stop the daemons we started, newest first.
kill_pidfile "$S/run/slurmd.pid" slurmd 10
# Fallback if scancel was impossible or too slow: SIGKILL the remaining
# slurmstepd of this cluster together with their tasks.
for p in $(our_stepds); do
    # shellcheck disable=SC2046
    kill -KILL "$p" $(descendants "$p") 2>/dev/null || true
done
kill_pidfile "$S/run/slurmctld.pid" slurmctld 10
kill_pidfile "$S/munge/munged.pid" munged 10

wait_reaped

# 3. Remove the state directory.
rm -rf -- "$S"
note "cluster in $S stopped and removed"
