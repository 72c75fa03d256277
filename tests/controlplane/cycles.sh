#!/usr/bin/env bash
# Starts and stops the control plane N times in a row (default 100), each
# time in a fresh run directory with this script as its owner, and reports
# every start that failed. A long check of up.sh and down.sh, not part of
# the test command.
#
#   cycles.sh [N]
set -euo pipefail
CP_SCRIPT=cycles.sh
CP_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "$CP_HERE/lib.sh"

n="${1:-100}"
BIN="$(cp_bin_dir)"
failed=0
started=$(date +%s)
for i in $(seq 1 "$n"); do
  run="$(mktemp -d "${TMPDIR:-/tmp}/dragon-cycles-XXXXXX")"
  if DRAGON_CONTROLPLANE_BIN="$BIN" "$CP_HERE/up.sh" --owner-pid $$ "$run" 2>"$run.up.log"; then
    "$CP_HERE/down.sh" --purge "$run" 2>/dev/null || { cp_log "cycle $i: down.sh failed"; failed=$((failed + 1)); }
    rm -f "$run.up.log"
  else
    failed=$((failed + 1))
    cp_log "cycle $i: up.sh failed (its output: $run.up.log, logs: $run/logs)"
    tail -n 5 "$run.up.log" >&2 || true
  fi
done
cp_log "$n cycles in $(($(date +%s) - started)) s: $failed failed"
[ "$failed" = 0 ]
