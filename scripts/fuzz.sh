#!/usr/bin/env bash
# Runs every fuzz target (fuzz/fuzz_targets/) for SECONDS each (default 60) with libFuzzer
# through cargo-fuzz, starting from a copy of the committed corpus so that the repository is
# never modified. Prints each target's executions; exits non-zero if any target crashed, and
# then keeps the crashing inputs and the logs in the directory it names.
#   scripts/fuzz.sh [SECONDS]
# Prefers a nightly toolchain (libFuzzer's instrumentation); installs cargo-fuzz if missing. The
# build goes to $CARGO_TARGET_DIR, or target/fuzz when it is unset.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
case "$seconds" in
  '' | *[!0-9]*)
    echo "usage: scripts/fuzz.sh [SECONDS]" >&2
    exit 2
    ;;
esac

# libFuzzer's instrumentation takes -Z flags: a nightly toolchain where one is installed,
# otherwise the default toolchain with its unstable flags unlocked.
if cargo +nightly --version >/dev/null 2>&1; then
  fuzz=(cargo +nightly fuzz)
else
  echo "no nightly toolchain: fuzzing with $(rustc --version) and RUSTC_BOOTSTRAP=1" >&2
  fuzz=(env RUSTC_BOOTSTRAP=1 cargo fuzz)
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target/fuzz}"
# Under RUST_BACKTRACE=1 every anyhow error captures a backtrace, which slows the hostfile
# target several times; panics still print theirs.
export RUST_LIB_BACKTRACE=0
work="$(mktemp -d)"
keep=""
trap '[ -n "$keep" ] || rm -rf "$work"' EXIT

targets=()
for file in fuzz/fuzz_targets/*.rs; do
  name="$(basename "$file" .rs)"
  targets+=("$name")
done

# One build for all targets (release, debug assertions and overflow checks, AddressSanitizer).
(cd fuzz && "${fuzz[@]}" build)

# Targets run side by side, one per core: each is single-threaded.
jobs="$(nproc 2>/dev/null || echo 1)"

fuzz_one() {
  local target="$1" status=0 max_len=4096
  mkdir -p "$work/corpus/$target" "$work/artifacts/$target"
  if [ -d "fuzz/corpus/$target" ]; then
    cp -R "fuzz/corpus/$target/." "$work/corpus/$target/"
  fi
  # Hostfiles are a few lines; longer inputs only slow the parser's per-host search.
  [ "$target" = hostfile ] && max_len=512
  (cd fuzz && "${fuzz[@]}" run "$target" "$work/corpus/$target" -- \
    -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/$target/") >"$work/$target.log" 2>&1 || status=$?
  echo "$status" >"$work/$target.status"
}

running=0
for target in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  fuzz_one "$target" &
  running=$((running + 1))
done
wait

failed=()
for target in "${targets[@]}"; do
  log="$work/$target.log"
  status="$(cat "$work/$target.status" 2>/dev/null || echo 1)"
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)"
  inputs="$(find "$work/corpus/$target" -type f | wc -l)"
  if [ "$status" -ne 0 ]; then
    failed+=("$target")
    tail -n 40 "$log" >&2
    echo "$target: FAILED (exit $status) after ${runs:-?} executions; inputs in $work/artifacts/$target/" >&2
  else
    echo "$target: ${runs:-?} executions in ${seconds} s (${rate:-?} exec/s), no crash; corpus ${inputs} inputs"
  fi
done

if [ "${#failed[@]}" -ne 0 ]; then
  keep=yes
  echo "fuzzing found crashes in: ${failed[*]} (logs and inputs kept in $work)" >&2
  echo "reproduce: cd fuzz && cargo +nightly fuzz run TARGET INPUT" >&2
  exit 1
fi
