#!/usr/bin/env bash
# The repeatable figures of docs/performance.md: instructions per pod (and
# per `score` call) counted by callgrind, which a noisy machine cannot
# disturb. Each figure is the difference of two runs of dragon-bench's
# counting modes at two sizes, so start-up and compilation cancel out.
#
#   tests/callgrind.sh [SIDE...]
#
# SIDEs: wasm, wasm-gangs, native, native-gangs (throughput: lone pods under
# baseline, gangs of 8 under dragon, on 5,000 nodes), score-wasm,
# score-native (DRAGON's score on 5,000 nodes). Default: wasm wasm-gangs.
# DRAGON_BENCH=path uses a dragon-bench already built (to compare two
# builds); otherwise it is built here.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind is not installed" >&2; exit 1; }
bin=${DRAGON_BENCH:-}
if [ -z "$bin" ]; then
  cargo build --release -q -p dragon-tests --bin dragon-bench
  bin=target/release/dragon-bench
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Total instructions of one run of dragon-bench with the given arguments.
count() {
  valgrind --tool=callgrind --callgrind-out-file="$out/cg" "$bin" "$@" >"$out/log" 2>&1 \
    || { cat "$out/log" >&2; exit 1; }
  awk '/^(summary|totals):/ { n = $2 } END { print n }' "$out/cg"
}

# Instructions per unit between LOW and HIGH units of MODE SIDE.
per() {
  local mode=$1 side=$2 low=$3 high=$4
  local a b
  a=$(count "$mode" "$side" "$low")
  b=$(count "$mode" "$side" "$high")
  echo $(( (b - a) / (high - low) ))
}

[ $# -gt 0 ] || set -- wasm wasm-gangs
for side in "$@"; do
  case $side in
    wasm|wasm-gangs|native|native-gangs)
      echo "throughput $side: $(per --count-throughput "$side" 200 1000) instructions per pod" ;;
    score-wasm|score-native)
      echo "$side: $(per --count-score "${side#score-}" 100 600) instructions per call" ;;
    *) echo "callgrind.sh: unknown side $side" >&2; exit 2 ;;
  esac
done
