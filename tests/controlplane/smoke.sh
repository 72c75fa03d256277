#!/usr/bin/env bash
# End-to-end check of the test control plane, with curl only:
#   1. up.sh (etcd, kube-apiserver, kube-controller-manager, kwok) in a temp dir
#   2. a Node annotated kwok.x-k8s.io/node=fake becomes Ready
#   3. a Pod with spec.nodeName and dragon.dev/complete-after-seconds: "5"
#      becomes Running, then Succeeded about 5 s after its startTime
#   4. a Pod with dragon.dev/complete-after: "3s" also completes
#   5. scheduler.sh starts the default kube-scheduler; a Pod without nodeName
#      is bound to the fake node and runs
#   6. down.sh stops everything and no process of the run is left
# Prints "N passed, N failed" at the end; exits non-zero on any failure.
#
#   smoke.sh [RUNDIR]     (default: a new temp dir, removed when all passed)
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
given_run="${1:-}"
run="${1:-$(mktemp -d "${TMPDIR:-/tmp}/dragon-cp-smoke.XXXXXX")}"
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   - $*"; }
bad() { failed=$((failed + 1)); echo "FAIL - $*"; }

finish() {
  "$HERE/down.sh" "$run" || bad "down.sh reported a process still alive"
  left="$(ps -eo pid=,args= | grep -F -- "$run" | grep -v -e grep -e smoke.sh || true)"
  if [ -z "$left" ]; then ok "no process of $run is left"; else bad "left running: $left"; fi
  echo "$passed passed, $failed failed"
  if [ "$failed" = 0 ] && [ -z "$given_run" ] && [ -z "${KEEP_RUN:-}" ]; then rm -rf "$run"; fi
  if [ "$failed" = 0 ]; then exit 0; else exit 1; fi
}

t0=$(date +%s)
if ! "$HERE/up.sh" --owner-pid $$ "$run"; then
  bad "up.sh failed"
  finish
fi
ok "up.sh: control plane ready in $(($(date +%s) - t0))s"
# shellcheck disable=SC1091
. "$run/env"

api() { # api METHOD PATH [JSON]
  curl -sS --max-time 10 --cacert "$DRAGON_CP_CA" -H "Authorization: Bearer $DRAGON_CP_TOKEN" \
    -H 'Content-Type: application/json' -X "$1" "$DRAGON_CP_APISERVER_URL$2" ${3:+-d "$3"}
}
field() { tr -d " \n" | grep -o "\"$1\":\"[^\"]*\"" | head -n 1 | sed 's/.*:"\(.*\)"/\1/'; }
# wait_for SECONDS DESCRIPTION CMD...: poll CMD every 0.5 s
wait_for() {
  local limit="$1" what="$2" start
  shift 2
  start=$(date +%s)
  while ! "$@"; do
    if [ $(($(date +%s) - start)) -ge "$limit" ]; then bad "$what (not within ${limit}s)"; return 1; fi
    sleep 0.5
  done
  ok "$what ($(($(date +%s) - start))s)"
}

api POST /api/v1/nodes '{"apiVersion":"v1","kind":"Node","metadata":{"name":"fake-0","annotations":{"kwok.x-k8s.io/node":"fake"},"labels":{"type":"kwok"}},"status":{"allocatable":{"cpu":"32","memory":"256Gi","pods":"110","nvidia.com/gpu":"8"},"capacity":{"cpu":"32","memory":"256Gi","pods":"110","nvidia.com/gpu":"8"}}}' >/dev/null
node_ready() { api GET /api/v1/nodes/fake-0 | tr -d ' \n' | grep -q '"type":"Ready","status":"True"'; }
wait_for 60 "node fake-0 Ready" node_ready
if api GET /api/v1/nodes/fake-0 | tr -d ' \n' | grep -q '"nvidia.com/gpu":"8"'; then ok "node keeps its own allocatable (8 GPUs)"; else bad "node allocatable lost"; fi

pod_json() { # name annotations-json nodeName-or-empty
  local node=""
  [ -n "$3" ] && node="\"nodeName\":\"$3\","
  printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s","annotations":%s},"spec":{%s"restartPolicy":"Never","containers":[{"name":"main","image":"busybox","resources":{"requests":{"cpu":"1"}}}]}}' "$1" "$2" "$node"
}
phase() { api GET "/api/v1/namespaces/default/pods/$1" | field phase; }
is_phase() { [ "$(phase "$1")" = "$2" ]; }

api POST /api/v1/namespaces/default/pods "$(pod_json job-a '{"dragon.dev/complete-after-seconds":"5"}' fake-0)" >/dev/null
created=$(date +%s)
wait_for 30 "pod job-a Running" is_phase job-a Running
if is_phase job-a Running; then
  sleep 2
  if is_phase job-a Running; then ok "pod job-a still Running 2s later"; else bad "pod job-a left Running too early: $(phase job-a)"; fi
fi
wait_for 30 "pod job-a Succeeded" is_phase job-a Succeeded
took=$(($(date +%s) - created))
if [ "$took" -ge 4 ] && [ "$took" -le 9 ]; then ok "job-a ran ~5s (created->Succeeded ${took}s)"; else bad "job-a took ${took}s, expected ~5"; fi
body="$(api GET /api/v1/namespaces/default/pods/job-a)"
start="$(echo "$body" | field startTime)"
fin="$(echo "$body" | field finishedAt)"
echo "     job-a startTime=$start finishedAt=$fin"

api POST /api/v1/namespaces/default/pods "$(pod_json job-b '{"dragon.dev/complete-after":"3s"}' fake-0)" >/dev/null
wait_for 30 "pod job-b (complete-after: 3s) Succeeded" is_phase job-b Succeeded

api POST /api/v1/namespaces/default/pods "$(pod_json job-bad '{"dragon.dev/complete-after-seconds":"soon"}' fake-0)" >/dev/null
wait_for 30 "pod job-bad Running" is_phase job-bad Running
sleep 3
if is_phase job-bad Running; then ok "malformed completion annotation: pod keeps running"; else bad "job-bad: $(phase job-bad)"; fi
api DELETE /api/v1/namespaces/default/pods/job-bad >/dev/null
gone() { [ "$(api GET /api/v1/namespaces/default/pods/job-bad | field reason)" = "NotFound" ]; }
wait_for 30 "deleted pod on a fake node goes away (pod-delete stage)" gone

if "$HERE/scheduler.sh" "$run"; then
  ok "default kube-scheduler started"
  api POST /api/v1/namespaces/default/pods "$(pod_json sched-1 '{"dragon.dev/complete-after-seconds":"2"}' '')" >/dev/null
  bound() { [ "$(api GET /api/v1/namespaces/default/pods/sched-1 | field nodeName)" = "fake-0" ]; }
  wait_for 30 "pod without nodeName bound to fake-0 by kube-scheduler" bound
  wait_for 30 "scheduled pod sched-1 Succeeded" is_phase sched-1 Succeeded
else
  bad "scheduler.sh failed"
fi

finish
