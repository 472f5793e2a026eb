#!/usr/bin/env bash
# Prints the simulator's trace hash of a fixed set of runs, one per algorithm (some with faults),
# so that a refactoring can show it left every algorithm's behaviour unchanged:
#   scripts/trace-hashes.sh target/release/ftcoll-launch > before.txt   # ... change ...
#   scripts/trace-hashes.sh target/release/ftcoll-launch | diff before.txt -
set -euo pipefail
bin="${1:-target/release/ftcoll-launch}"
runs=(
  "--algo rdb -n 1000 --input int"
  "--algo ardb -n 4096 --eps 1e-3"
  "--algo direct -n 13 --input int --fault kill:rank=3,at=5"
  "--algo ps -n 64 --eps 1e-9"
  "--algo pf -n 64 --eps 1e-10 --fault flip-state:rank=5,bit=40,var=value,at=400"
  "--algo pflc -n 64 --eps 1e-10 --fault flip-msg:rank=3,bit=50,nth=20"
  "--algo pfcc -n 64 --eps 1e-10 --fault kill:rank=7,at=300"
  "--algo pcf -n 64 --topology hypercube --eps 1e-10 --fault cut:link=0-1,at=500"
  "--algo hps -n 256 --eps 1e-3"
  "--algo hpflc -n 256 --eps 1e-3"
  "--algo corrected-reduce -n 100 --tolerate 2 --input int --fault kill:rank=4,at=0 --fault kill:rank=17,at=20"
  "--algo corrected-bcast -n 100 --tolerate 2 --input int --fault kill:rank=5,at=10"
  "--algo corrected-allreduce -n 100 --tolerate 2 --input int --fault kill:rank=9,at=15"
  "--algo ftco-bcast -n 200 --ftco-tree knomial:4 --ftco-roots 2 --input int --fault kill:rank=3,at=0"
  "--algo ftco-reduce -n 200 --ftco-tree kary:3 --input int --fault kill:rank=11,at=30"
  "--algo ftco-allreduce -n 300 --ftco-tree knomial:3 --ftco-roots 3 --service-distance rsd --input onehot --len 300 --fault kill:rank=0,at=40 --fault slow:rank=5,factor=20"
  "--algo era-agree -n 128 --ops 5 --fault kill:rank=1,at=0 --fault kill:rank=60,at=50"
  "--algo pf -n 64 --eps 1e-10 --fault drop:rank=all,rate=0.01"
)
for args in "${runs[@]}"; do
  # shellcheck disable=SC2086
  hash=$("$bin" --sim --no-tui --seed 3 --check-determinism $args 2>&1 >/dev/null |
    sed -n 's/.*trace hash \([0-9a-f]*\) twice.*/\1/p') || true
  printf '%s  %s\n' "${hash:-FAILED}" "$args"
done
