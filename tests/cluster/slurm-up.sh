#!/usr/bin/env bash
# slurm-up.sh STATE_DIR
#
# Start a private single-node Slurm cluster (munged + slurmctld + slurmd) on
# this machine, entirely under STATE_DIR, so that tests can exercise
# `ftcoll-launch` under salloc/srun without a real cluster.
#
# Nothing system-wide is touched: munged gets its own key, socket, pid, log and
# seed files (--key-file/--socket/--pid-file/--log-file/--seed-file), Slurm
# finds that socket through AuthInfo=socket=..., and every Slurm path (spool,
# state, pid and log files, plugstack.conf) lives in STATE_DIR. TCP ports are
# non-default (16817/16818, override with FTC_SLURMCTLD_PORT/FTC_SLURMD_PORT)
# so a real Slurm on the host would not clash. Run as root (SlurmUser=root,
# SlurmdUser=root; slurmd must be able to start tasks as any user).
#
# On success prints, on stdout, the line the caller must eval:
#     export SLURM_CONF=STATE_DIR/etc/slurm.conf
# Tear down with slurm-down.sh STATE_DIR.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

[[ $# -eq 1 ]] || die "usage: $0 STATE_DIR"
need_root
NEED_HINT="apt-get install slurm-wlm munge" need_cmd munged mungekey munge slurmctld slurmd sinfo scontrol ss hostname nproc realpath timeout

S=$(abs_path "$1")
guard_state_dir "$S"
CTLD_PORT=${FTC_SLURMCTLD_PORT:-16817}
SLURMD_PORT=${FTC_SLURMD_PORT:-16818}
WAIT_SECS=${FTC_SLURM_WAIT:-30}
[[ $WAIT_SECS =~ ^[0-9]+$ ]] || die "FTC_SLURM_WAIT must be a number of seconds"
NODE=$(hostname -s)
REAL_CPUS=$(nproc)
# Advertised CPUs: at least 8 so that `salloc -n8` fits on one node even on a
# 2-core machine (see the comment in slurm.conf below).
NODE_CPUS=${FTC_SLURM_CPUS:-8}
[[ $NODE_CPUS =~ ^[0-9]+$ ]] && ((NODE_CPUS >= 1)) || die "FTC_SLURM_CPUS must be a positive number"
((NODE_CPUS >= REAL_CPUS)) || NODE_CPUS=$REAL_CPUS

if [[ -e $S ]]; then
    [[ -d $S ]] || die "STATE_DIR '$S' exists and is not a directory"
    [[ -z $(ls -A "$S") ]] || die "STATE_DIR '$S' is not empty (already up?); run slurm-down.sh $S first"
fi

for p in "$CTLD_PORT" "$SLURMD_PORT"; do
    [[ $p =~ ^[0-9]+$ ]] && ((p >= 1024 && p <= 65535)) || die "port '$p' must be 1024..65535"
    if [[ -n $(ss -Htln "sport = :$p") ]]; then
        die "TCP port $p is already in use; set FTC_SLURMCTLD_PORT/FTC_SLURMD_PORT to free ports"
    fi
done

# munged insists that every directory above its socket is world-executable and
# that no directory on the key/socket/log paths is group/world-writable.
umask 022
d=$S
while [[ $d != / ]]; do
    d=$(dirname "$d")
    [[ -d $d ]] || continue
    perm=$(stat -c %a "$d")
    (((8#$perm & 1) != 0)) || die "munged needs o+x on every parent of STATE_DIR; '$d' lacks it"
done
mkdir -p "$S"
chmod 755 "$S"
mkdir -p "$S/munge" "$S/etc" "$S/log" "$S/run" "$S/spool/slurmctld" "$S/spool/slurmd"
chmod 755 "$S/munge" "$S/etc" "$S/log" "$S/run" "$S/spool"
chmod 700 "$S/spool/slurmctld" "$S/spool/slurmd"
echo "slurm-up.sh $(date -u +%FT%TZ)" >"$S/.ftcoll-slurm"   # marker checked by slurm-down.sh

CONF=$S/etc/slurm.conf
MUNGE_SOCKET=$S/munge/munge.socket

# If anything below fails, stop what was already started (pid files) but keep
# STATE_DIR so the logs named in the error message can still be read.
cleanup_on_error() {
    local rc=$?
    if ((rc != 0)); then
        kill_pidfile "$S/run/slurmd.pid" slurmd 5
        kill_pidfile "$S/run/slurmctld.pid" slurmctld 5
        kill_pidfile "$S/munge/munged.pid" munged 5
        wait_reaped
        note "daemons stopped; logs kept in $S/log and $S/munge (remove with slurm-down.sh $S)"
    fi
}
trap cleanup_on_error EXIT

# --- munge ------------------------------------------------------------------
mungekey --create --keyfile="$S/munge/munge.key" >/dev/null
chmod 400 "$S/munge/munge.key"
munged --key-file="$S/munge/munge.key" \
    --socket="$MUNGE_SOCKET" \
    --pid-file="$S/munge/munged.pid" \
    --log-file="$S/munge/munged.log" \
    --seed-file="$S/munge/munged.seed" </dev/null >/dev/null 2>>"$S/munge/munged.log" ||
    die "munged failed to start; see $S/munge/munged.log"
munge_ok() { munge -n -S "$MUNGE_SOCKET" 2>/dev/null | unmunge -S "$MUNGE_SOCKET" >/dev/null 2>&1; }
wait_until 10 munge_ok || die "munged did not answer within 10 s; see $S/munge/munged.log"

# --- slurm.conf --------------------------------------------------------------
# Node size: the machine may have only 2 cores, but tests need 8 tasks in one
# allocation (salloc -N1 -n8). OverSubscribe only lets *different jobs* share
# CPUs; it does not let one job have more tasks than CPUs. So the node
# advertises CPUs=8 (one socket, 8 cores, 1 thread) and
# SlurmdParameters=config_overrides makes slurmctld trust slurm.conf instead of
# draining the node for "Low CPUs" when slurmd reports the real 2.
# SelectTypeParameters=CR_CPU: allocate by CPU, do not track memory.
# ProctrackType=proctrack/linuxproc and TaskPlugin=task/none: no cgroups
# (not usable in this container). KillWait=5: cancelled steps get SIGKILL 5 s
# after SIGTERM instead of 30 s, which keeps teardown fast.
cat >"$CONF" <<CONF
# Generated by tests/cluster/slurm-up.sh for a throwaway single-node cluster.
ClusterName=ftctest
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CredType=cred/munge
StateSaveLocation=$S/spool/slurmctld
SlurmdSpoolDir=$S/spool/slurmd
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$S/etc/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
KillWait=5
InactiveLimit=0
MinJobAge=60
SlurmdTimeout=60
SlurmctldTimeout=60
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$NODE_CPUS Sockets=1 CoresPerSocket=$NODE_CPUS ThreadsPerCore=1 RealMemory=1024 State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
CONF
# Empty plugstack.conf so the system one (/etc/slurm/plugstack.conf) is not read.
: >"$S/etc/plugstack.conf"
export SLURM_CONF=$CONF

# --- slurmctld ---------------------------------------------------------------
slurmctld -f "$CONF" </dev/null >/dev/null 2>>"$S/log/slurmctld.stderr" ||
    die "slurmctld failed to start; see $S/log/slurmctld.log and $S/log/slurmctld.stderr"
ctld_up() { [[ $(timeout 5 scontrol ping 2>/dev/null) == *"is UP"* ]]; }
wait_until "$WAIT_SECS" ctld_up ||
    die "slurmctld did not come up within $WAIT_SECS s; see $S/log/slurmctld.log"

# --- slurmd ------------------------------------------------------------------
slurmd -f "$CONF" </dev/null >/dev/null 2>>"$S/log/slurmd.stderr" ||
    die "slurmd failed to start; see $S/log/slurmd.log and $S/log/slurmd.stderr"
node_idle() { [[ $(timeout 5 sinfo -h -n "$NODE" -o %T 2>/dev/null) == idle ]]; }
if ! wait_until "$WAIT_SECS" node_idle; then
    state=$(timeout 5 sinfo -h -n "$NODE" -o '%T %E' 2>/dev/null || true)
    die "node $NODE not idle within $WAIT_SECS s (state: ${state:-unknown}); see $S/log/slurmd.log and $S/log/slurmctld.log"
fi

trap - EXIT
note "cluster up: node $NODE ($NODE_CPUS CPUs advertised, $REAL_CPUS real), partition debug, ports $CTLD_PORT/$SLURMD_PORT"
echo "export SLURM_CONF=$CONF"
