#!/usr/bin/env bash
# Stops and/or starts one component of a control plane started by up.sh (or
# scheduler.sh), with the command line it was first started with (recorded
# in RUNDIR/cmd/NAME by cp_start): same binary, flags, ports, certificates
# and data directory, so clients reconnect to the same address. For fault
# tests: an API server or etcd that goes away and comes back.
#
#   restart.sh RUNDIR NAME [restart|stop|kill|start]     (default: restart)
#
#   NAME     etcd, kube-apiserver, kube-controller-manager, kwok, kube-scheduler
#   stop     SIGTERM (a clean shutdown), SIGKILL after 15 s; returns once dead
#   kill     SIGKILL at once (a crash); returns once dead
#   start    start it again and return once it is ready (the same check as
#            up.sh: etcd /health, kube-apiserver /readyz, the others /healthz)
#   restart  stop, then start
#
# RUNDIR/pids/NAME.pid and DRAGON_CP_PID_<NAME> in RUNDIR/env follow the new
# process. Output is appended to the same RUNDIR/logs/NAME.log.
# Environment: DRAGON_CP_READY_TIMEOUT (seconds, default 120).
set -euo pipefail
CP_SCRIPT=restart.sh
CP_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "$CP_HERE/lib.sh"

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  cp_die "usage: restart.sh RUNDIR NAME [restart|stop|kill|start]"
fi
[ -d "$1" ] || cp_die "$1 is not a run directory"
CP_RUN="$(cd "$1" && pwd)"
run="$CP_RUN"
name="$2"
action="${3:-restart}"
[ -f "$run/env" ] || cp_die "$run/env is missing (run up.sh first)"
# shellcheck disable=SC1091
. "$run/env"

# kill_now: SIGKILL the recorded process and wait until it is gone.
kill_now() {
  local pid
  cp_pid_alive "$run" "$name" || { rm -f "$run/pids/$name.pid" "$run/pids/$name.start"; return 0; }
  pid="$(cat "$run/pids/$name.pid")"
  kill -KILL "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do
    cp_pid_alive "$run" "$name" || break
    sleep 0.1
  done
  cp_pid_alive "$run" "$name" && cp_die "$name (pid $pid) survived SIGKILL"
  cp_log "killed $name (pid $pid)"
  rm -f "$run/pids/$name.pid" "$run/pids/$name.start"
}

stop_it() {
  cp_stop "$run" "$name"
  if cp_pid_alive "$run" "$name"; then cp_die "$name is still alive"; fi
}

# ready: the readiness check up.sh / scheduler.sh use for NAME.
ready() {
  case "$name" in
    etcd) curl -sf --max-time 2 "$DRAGON_CP_ETCD_URL/health" | grep -q '"health":"true"' ;;
    kube-apiserver) cp_curl_api "$DRAGON_CP_APISERVER_URL/readyz" | grep -q '^ok$' ;;
    kube-controller-manager) curl -skf --max-time 2 "$DRAGON_CP_KCM_URL/healthz" | grep -q '^ok$' ;;
    kwok) curl -sf --max-time 2 "$DRAGON_CP_KWOK_URL/healthz" >/dev/null ;;
    kube-scheduler) curl -skf --max-time 2 "$DRAGON_CP_SCHEDULER_URL/healthz" | grep -q '^ok$' ;;
    *) true ;;
  esac
}

start_it() {
  [ -f "$run/cmd/$name" ] ||
    cp_die "no recorded command line for $name ($run/cmd/$name; was the control plane started by an older up.sh?)"
  local args=()
  mapfile -d '' -t args <"$run/cmd/$name"
  [ "${#args[@]}" -gt 0 ] || cp_die "$run/cmd/$name is empty"
  cp_start "$run" "$name" "${args[@]}"
  cp_wait "$run" "$name" "${DRAGON_CP_READY_TIMEOUT:-120}" ready
  local var
  var="DRAGON_CP_PID_$(echo "$name" | tr 'a-z-' 'A-Z_')"
  sed -i "/^$var=/d" "$run/env"
  echo "$var=$(cat "$run/pids/$name.pid")" >>"$run/env"
}

case "$action" in
  stop) stop_it ;;
  kill) kill_now ;;
  start) start_it ;;
  restart) stop_it; start_it ;;
  *) cp_die "unknown action $action (restart, stop, kill or start)" ;;
esac
