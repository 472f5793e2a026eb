#!/usr/bin/env bash
# Shared helpers for the tests/cluster/*.sh scripts (sourced, not executed).
#
# Why: every script needs the same small set of guards (root check, absolute
# state dir, bounded waits, killing exactly the pids recorded in pid files), and
# keeping them in one place keeps the teardown logic identical everywhere.
set -euo pipefail

# die MESSAGE: print a one-line error prefixed with the script name and exit 1.
die() {
    echo "$(basename "$0"): error: $*" >&2
    exit 1
}

# note MESSAGE: progress line on stderr (stdout is kept for the export lines).
note() {
    echo "$(basename "$0"): $*" >&2
}

need_root() {
    [[ $(id -u) -eq 0 ]] || die "needs root"
}

# need_cmd CMD...: fail early with a clear message if a tool is missing.
need_cmd() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 || die "required command '$c' not found${NEED_HINT:+ ($NEED_HINT)}"
    done
}

# abs_path PATH: absolute path without requiring it to exist.
abs_path() {
    realpath -m -- "$1"
}

# guard_state_dir DIR: refuse obviously dangerous values before any rm -rf.
guard_state_dir() {
    case "$1" in
        "" | / | /bin | /boot | /dev | /etc | /home | /lib | /proc | /root | /run | /sbin | /sys | /tmp | /usr | /var | /work | /work/main)
            die "refusing to use '$1' as STATE_DIR"
            ;;
    esac
}

# wait_until SECONDS CMD...: run CMD every 0.5 s until it succeeds; returns 1
# if it never succeeded within SECONDS (bounded: never loops forever).
wait_until() {
    local secs=$1
    shift
    local deadline=$((SECONDS + secs))
    while true; do
        if "$@"; then
            return 0
        fi
        ((SECONDS < deadline)) || return 1
        sleep 0.5
    done
}

# pid_alive PID [COMM]: true if PID exists and is not a zombie (and its
# /proc/PID/comm starts with COMM, which guards against a recycled pid
# belonging to something else).
pid_alive() {
    local pid=$1 comm=${2:-}
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    local stat state
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    state=${stat##*) }
    state=${state%% *}
    # A zombie has already exited; it only waits for its parent (here often
    # the container's init, which may reap late) to collect it.
    [[ $state != Z ]] || return 1
    if [[ -n $comm ]]; then
        local actual
        actual=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
        [[ $actual == "$comm"* ]] || return 1
    fi
    return 0
}

# pid_gone PID: negation of pid_alive (for wait_until).
pid_gone() {
    ! pid_alive "$1"
}

# kill_pidfile FILE COMM [GRACE]: SIGTERM the pid recorded in FILE if it is
# still a COMM process, wait up to GRACE s (default 10), then SIGKILL.
# Removes FILE. Succeeds if the file or the process is already gone.
# The pid is added to REAP_PIDS for a final wait_reaped.
REAP_PIDS=()
kill_pidfile() {
    local file=$1 comm=$2 grace=${3:-10} pid
    [[ -f $file ]] || return 0
    pid=$(tr -dc '0-9' <"$file" 2>/dev/null || true)
    if [[ -n $pid ]] && pid_alive "$pid" "$comm"; then
        kill -TERM "$pid" 2>/dev/null || true
        if ! wait_until "$grace" pid_gone "$pid"; then
            note "$comm (pid $pid) ignored SIGTERM for ${grace} s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            wait_until 5 pid_gone "$pid" || note "warning: $comm (pid $pid) still alive after SIGKILL"
        fi
        REAP_PIDS+=("$pid")
    fi
    rm -f -- "$file"
}

# all_reaped PID...: true when none of the PIDs has a /proc entry any more,
# zombies included. Killed daemons are re-parented to PID 1, and this
# container's init reaps them only after a moment, so callers wait (bounded)
# for this to avoid leaving <defunct> entries in `ps` right after teardown.
all_reaped() {
    local p
    for p in "$@"; do
        [[ ! -e /proc/$p ]] || return 1
    done
    return 0
}

# wait_reaped: bounded wait (5 s) until every pid in REAP_PIDS has vanished
# from /proc, so no <defunct> entry is left behind in `ps`.
wait_reaped() {
    ((${#REAP_PIDS[@]} > 0)) || return 0
    wait_until 5 all_reaped "${REAP_PIDS[@]}" || note "note: killed pids ${REAP_PIDS[*]} not yet reaped by PID 1"
}
