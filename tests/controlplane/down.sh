#!/usr/bin/env bash
# Stops the processes that up.sh / scheduler.sh started for RUNDIR, and only
# those: each RUNDIR/pids/NAME.pid is signalled only while that pid's command
# line still mentions RUNDIR (so a recycled pid is never hit). SIGTERM first,
# SIGKILL after 15 s. Logs, keys and etcd data stay in RUNDIR (remove it
# yourself, or pass --purge).
#
#   down.sh [--purge] RUNDIR [NAME...]     NAME: kube-scheduler, kwok, ...
#
# Exits non-zero if a process it was asked to stop is still alive.
set -euo pipefail
CP_SCRIPT=down.sh
CP_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "$CP_HERE/lib.sh"

purge=0
if [ "${1:-}" = "--purge" ]; then purge=1; shift; fi
[ $# -ge 1 ] || cp_die "usage: down.sh [--purge] RUNDIR [NAME...]"
[ -d "$1" ] || { cp_log "$1 does not exist; nothing to stop"; exit 0; }
run="$(cd "$1" && pwd)"
shift

# Reverse start order; anything else found in pids/ last.
order=(owner-watch kube-scheduler kwok kube-controller-manager kube-apiserver etcd)
if [ $# -gt 0 ]; then
  names=("$@")
else
  names=("${order[@]}")
  for f in "$run"/pids/*.pid; do
    [ -e "$f" ] || continue
    n="$(basename "$f" .pid)"
    case " ${order[*]} " in *" $n "*) ;; *) names+=("$n") ;; esac
  done
fi

status=0
for n in "${names[@]}"; do
  # The owner watcher runs this script itself (exec): do not signal ourselves.
  if [ -f "$run/pids/$n.pid" ] && [ "$(cat "$run/pids/$n.pid")" = "$$" ]; then
    rm -f "$run/pids/$n.pid" "$run/pids/$n.start"
    continue
  fi
  cp_stop "$run" "$n"
  if cp_pid_alive "$run" "$n"; then
    cp_log "$n is still alive"
    status=1
  fi
done
if [ -f "$run/env" ]; then
  for n in "${names[@]}"; do
    sed -i "/^DRAGON_CP_PID_$(echo "$n" | tr 'a-z-' 'A-Z_')=/d" "$run/env"
  done
fi
if [ "$purge" = 1 ] && [ "$status" = 0 ] && [ $# -eq 0 ]; then
  rm -rf "$run"
  cp_log "removed $run"
fi
exit "$status"
