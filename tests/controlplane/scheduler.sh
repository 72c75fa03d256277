#!/usr/bin/env bash
# Starts the default kube-scheduler against a control plane started by up.sh:
#
#   scheduler.sh RUNDIR [extra kube-scheduler flags...]
#
# It uses RUNDIR/kubeconfig for --kubeconfig, --authentication-kubeconfig and
# --authorization-kubeconfig, --leader-elect=false (and
# --authentication-skip-lookup=true: see up.sh), serves /healthz on a free
# 127.0.0.1 port, waits until it is healthy, writes RUNDIR/pids/kube-scheduler.pid
# and appends DRAGON_CP_SCHEDULER_URL and DRAGON_CP_PID_KUBE_SCHEDULER to
# RUNDIR/env. Stop it alone with `down.sh RUNDIR kube-scheduler`.
set -euo pipefail
CP_SCRIPT=scheduler.sh
CP_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "$CP_HERE/lib.sh"

[ $# -ge 1 ] || cp_die "usage: scheduler.sh RUNDIR [kube-scheduler flags...]"
[ -d "$1" ] || cp_die "$1 is not a run directory"
CP_RUN="$(cd "$1" && pwd)"
shift
[ -f "$CP_RUN/kubeconfig" ] || cp_die "$CP_RUN/kubeconfig is missing (run up.sh first)"
BIN="$(cp_bin_dir)"
[ -x "$BIN/kube-scheduler" ] || cp_die "$BIN/kube-scheduler is missing (run build.sh)"

kubeconfig="$CP_RUN/kubeconfig"
extra=("$@")
start_scheduler() {
  cp_free_port port
  cp_start "$CP_RUN" kube-scheduler "$BIN/kube-scheduler" \
    --kubeconfig "$kubeconfig" \
    --authentication-kubeconfig "$kubeconfig" \
    --authorization-kubeconfig "$kubeconfig" \
    --authentication-skip-lookup=true \
    --leader-elect=false \
    --bind-address 127.0.0.1 \
    --secure-port "$port" \
    --cert-dir "$CP_RUN/scheduler-certs" \
    "${extra[@]}"
}
sched_ready() { curl -skf --max-time 2 "https://127.0.0.1:$port/healthz" | grep -q '^ok$'; }
cp_start_ready "$CP_RUN" kube-scheduler "${DRAGON_CP_READY_TIMEOUT:-120}" start_scheduler sched_ready
if [ -f "$CP_RUN/env" ]; then
  sed -i -e '/^DRAGON_CP_SCHEDULER_URL=/d' -e '/^DRAGON_CP_PID_KUBE_SCHEDULER=/d' "$CP_RUN/env"
  {
    echo "DRAGON_CP_SCHEDULER_URL=https://127.0.0.1:$port"
    echo "DRAGON_CP_PID_KUBE_SCHEDULER=$(cat "$CP_RUN/pids/kube-scheduler.pid")"
  } >>"$CP_RUN/env"
fi
