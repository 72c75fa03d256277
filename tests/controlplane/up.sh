#!/usr/bin/env bash
# Starts a real control plane on 127.0.0.1 for the end-to-end tests:
# etcd, kube-apiserver, kube-controller-manager and the KWOK controller
# (with the Stage files in kwok/stages/), and optionally the default
# kube-scheduler. Every server listens on 127.0.0.1 on a free port.
#
#   up.sh [--scheduler] [--no-controller-manager] [--owner-pid PID] RUNDIR
#
# RUNDIR (created if missing) receives:
#   env            KEY=VALUE lines (no quoting; values have no spaces):
#                  KUBECONFIG, DRAGON_CP_APISERVER_URL, DRAGON_CP_TOKEN,
#                  DRAGON_CP_CA, DRAGON_CP_ETCD_URL, DRAGON_CP_KWOK_URL,
#                  DRAGON_CP_KCM_URL, DRAGON_CP_BIN, DRAGON_CP_RUN and one
#                  DRAGON_CP_PID_<NAME> per process
#   kubeconfig     cluster (CA embedded) + bearer token of a system:masters user
#   token          that token;  tokens.csv  the apiserver's --token-auth-file
#   pki/           ca.crt/ca.key, apiserver serving cert, sa.key/sa.pub
#   pids/NAME.pid  one per process (down.sh stops exactly these)
#   logs/NAME.log  one per process
#   etcd-data/     etcd's data directory
# It returns once everything is ready. On failure it stops what it started.
#
# Options:
#   --scheduler               also start the default kube-scheduler (scheduler.sh)
#   --no-controller-manager   do not start kube-controller-manager
#   --owner-pid PID           run down.sh by itself when process PID exits
#                             (so a killed test run leaves nothing behind)
# Environment:
#   DRAGON_CONTROLPLANE_BIN   use the binaries in this directory instead of
#                             asking build.sh (which builds them if missing)
#   DRAGON_CP_READY_TIMEOUT   seconds to wait for each component (default 120)
set -euo pipefail
CP_SCRIPT=up.sh
CP_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "$CP_HERE/lib.sh"

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2; }

with_scheduler=0
with_kcm=1
owner_pid=""
run=""
while [ $# -gt 0 ]; do
  case "$1" in
    --scheduler) with_scheduler=1 ;;
    --no-controller-manager) with_kcm=0 ;;
    --owner-pid) owner_pid="${2:?--owner-pid needs a pid}"; shift ;;
    -h|--help) usage ;;
    -*) cp_die "unknown option $1 (see --help)" ;;
    *) [ -z "$run" ] || cp_die "only one RUNDIR"; run="$1" ;;
  esac
  shift
done
[ -n "$run" ] || usage
for tool in openssl curl setsid base64; do
  command -v "$tool" >/dev/null 2>&1 || cp_die "$tool is needed"
done

mkdir -p "$run"
CP_RUN="$(cd "$run" && pwd)"
run="$CP_RUN"
for n in etcd kube-apiserver kube-controller-manager kwok kube-scheduler; do
  if cp_pid_alive "$run" "$n"; then cp_die "$n already runs in $run; run down.sh $run first"; fi
done
rm -rf "$run/pids" "$run/etcd-data"
mkdir -p "$run/pids" "$run/logs" "$run/pki"

BIN="$(cp_bin_dir)"
for b in etcd kube-apiserver kube-controller-manager kwok; do
  [ -x "$BIN/$b" ] || cp_die "$BIN/$b is missing (run build.sh)"
done

started_ok=0
cleanup_on_failure() {
  if [ "$started_ok" != 1 ]; then
    cp_log "start-up failed; stopping what was started"
    "$CP_HERE/down.sh" "$run" >&2 || true
  fi
}
trap cleanup_on_failure EXIT
READY_TIMEOUT="${DRAGON_CP_READY_TIMEOUT:-120}"

# --- credentials --------------------------------------------------------------
pki="$run/pki"
(
  cd "$pki"
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -keyout ca.key -out ca.crt \
    -subj "/CN=dragon-test-ca" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr \
    -subj "/CN=kube-apiserver" 2>/dev/null
  printf '%s\n' "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=serverAuth" \
    "subjectAltName=IP:127.0.0.1,DNS:localhost" >apiserver.ext
  openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
    -days 3650 -extfile apiserver.ext -out apiserver.crt 2>/dev/null
  openssl genrsa -out sa.key 2048 2>/dev/null
  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
) || cp_die "openssl failed to create the keys in $pki"
token="$(openssl rand -hex 24)"
printf '%s\n' "$token" >"$run/token"
printf '%s,dragon-admin,dragon-admin-uid,"system:masters"\n' "$token" >"$run/tokens.csv"
chmod 600 "$run/token" "$run/tokens.csv" "$pki"/*.key

# --- ports ----------------------------------------------------------------------
cp_free_port etcd_port
cp_free_port etcd_peer_port
cp_free_port api_port
cp_free_port kwok_port
api_url="https://127.0.0.1:$api_port"

cat >"$run/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: dragon-test
  cluster:
    server: $api_url
    certificate-authority-data: $(base64 -w0 <"$pki/ca.crt")
users:
- name: dragon-admin
  user:
    token: $token
contexts:
- name: dragon-test
  context:
    cluster: dragon-test
    user: dragon-admin
    namespace: default
current-context: dragon-test
EOF
chmod 600 "$run/kubeconfig"
kubeconfig="$run/kubeconfig"

# --- etcd -----------------------------------------------------------------------
cp_start "$run" etcd "$BIN/etcd" \
  --name dragon-test \
  --data-dir "$run/etcd-data" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" \
  --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" \
  --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
  --initial-cluster "dragon-test=http://127.0.0.1:$etcd_peer_port" \
  --initial-cluster-state new \
  --unsafe-no-fsync \
  --log-level warn
etcd_healthy() { curl -sf --max-time 2 "http://127.0.0.1:$etcd_port/health" | grep -q '"health":"true"'; }
cp_wait "$run" etcd "$READY_TIMEOUT" etcd_healthy

# --- kube-apiserver -------------------------------------------------------------
# --endpoint-reconciler-type none: since 1.37 (at least) the apiserver refuses
# to start with a loopback --advertise-address while the endpoint reconciler
# (which publishes it in the default/kubernetes Endpoints) is on.
# --client-ca-file: the run's CA also authenticates client certificates (none
# are issued by up.sh; a test may sign its own with pki/ca.key).
# --feature-gates GenericWorkload=true and --runtime-config
# scheduling.k8s.io/v1beta1=true: Kubernetes' own gang API (PodGroups, and
# pods naming one in spec.schedulingGroup), beta and off by default in 1.37;
# TopologyAwareWorkloadScheduling=true (alpha): the API server keeps a
# PodGroup's spec.schedulingConstraints.topology instead of dropping it.
cp_start "$run" kube-apiserver "$BIN/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$etcd_port" \
  --bind-address 127.0.0.1 \
  --advertise-address 127.0.0.1 \
  --endpoint-reconciler-type none \
  --secure-port "$api_port" \
  --cert-dir "$pki" \
  --tls-cert-file "$pki/apiserver.crt" \
  --tls-private-key-file "$pki/apiserver.key" \
  --token-auth-file "$run/tokens.csv" \
  --client-ca-file "$pki/ca.crt" \
  --authorization-mode RBAC \
  --service-account-issuer "$api_url" \
  --service-account-key-file "$pki/sa.pub" \
  --service-account-signing-key-file "$pki/sa.key" \
  --service-cluster-ip-range 10.96.0.0/16 \
  --disable-admission-plugins ServiceAccount \
  --feature-gates GenericWorkload=true,TopologyAwareWorkloadScheduling=true \
  --runtime-config scheduling.k8s.io/v1beta1=true \
  --allow-privileged=true
api_ready() { cp_curl_api "$api_url/readyz" | grep -q '^ok$'; }
cp_wait "$run" kube-apiserver "$READY_TIMEOUT" api_ready

# --- kube-controller-manager ------------------------------------------------------
# --authentication-skip-lookup=true (also for kube-scheduler): otherwise these
# components read kube-system/extension-apiserver-authentication for a
# front-proxy (requestheader) CA this cluster does not have, and log an
# "Unhandled Error ... missing content for CA bundle" line every few seconds.
# Bearer tokens are still checked through TokenReview.
if [ "$with_kcm" = 1 ]; then
  start_kcm() {
    cp_free_port kcm_port
    cp_start "$run" kube-controller-manager "$BIN/kube-controller-manager" \
      --kubeconfig "$kubeconfig" \
      --authentication-kubeconfig "$kubeconfig" \
      --authorization-kubeconfig "$kubeconfig" \
      --authentication-skip-lookup=true \
      --leader-elect=false \
      --bind-address 127.0.0.1 \
      --secure-port "$kcm_port" \
      --cert-dir "$run/kcm-certs" \
      --service-account-private-key-file "$pki/sa.key" \
      --root-ca-file "$pki/ca.crt" \
      --cluster-name dragon-test
  }
  kcm_ready() { curl -skf --max-time 2 "https://127.0.0.1:$kcm_port/healthz" | grep -q '^ok$'; }
  cp_start_ready "$run" kube-controller-manager "$READY_TIMEOUT" start_kcm kcm_ready
fi

# --- kwok -------------------------------------------------------------------------
kwok_cfg=()
for f in "$CP_HERE"/kwok/stages/*.yaml; do kwok_cfg+=(--config "$f"); done
# HOME is the run dir's: kwok also loads ~/.kwok/kwok.yaml when it exists,
# which would add someone else's stages to ours.
mkdir -p "$run/kwok-home"
cp_start "$run" kwok env HOME="$run/kwok-home" "$BIN/kwok" \
  --kubeconfig "$kubeconfig" \
  "${kwok_cfg[@]}" \
  --manage-all-nodes=false \
  --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
  --server-address "127.0.0.1:$kwok_port" \
  --node-lease-duration-seconds 40
kwok_ready() { curl -sf --max-time 2 "http://127.0.0.1:$kwok_port/healthz" >/dev/null; }
cp_wait "$run" kwok "$READY_TIMEOUT" kwok_ready

# --- env file -------------------------------------------------------------------
{
  echo "DRAGON_CP_RUN=$run"
  echo "DRAGON_CP_BIN=$BIN"
  echo "KUBECONFIG=$kubeconfig"
  echo "DRAGON_CP_APISERVER_URL=$api_url"
  echo "DRAGON_CP_TOKEN=$token"
  echo "DRAGON_CP_CA=$pki/ca.crt"
  echo "DRAGON_CP_ETCD_URL=http://127.0.0.1:$etcd_port"
  echo "DRAGON_CP_KWOK_URL=http://127.0.0.1:$kwok_port"
  [ "$with_kcm" = 1 ] && echo "DRAGON_CP_KCM_URL=https://127.0.0.1:$kcm_port"
  for n in etcd kube-apiserver kube-controller-manager kwok; do
    if [ -f "$run/pids/$n.pid" ]; then
      echo "DRAGON_CP_PID_$(echo "$n" | tr 'a-z-' 'A-Z_')=$(cat "$run/pids/$n.pid")"
    fi
  done
} >"$run/env"

if [ "$with_scheduler" = 1 ]; then
  DRAGON_CONTROLPLANE_BIN="$BIN" "$CP_HERE/scheduler.sh" "$run"
fi

if [ -n "$owner_pid" ]; then
  # The owner is the process with that pid and that start time: a later
  # process given the same pid is not it.
  owner_started="$(cp_started "$owner_pid")"
  [ -n "$owner_started" ] || cp_die "owner process $owner_pid is not running"
  # shellcheck disable=SC2016 # expanded by the inner bash
  cp_start "$run" owner-watch bash -c \
    'while [ "$(. "$5"; cp_started "$1")" = "$2" ]; do sleep 1; done; exec "$3" "$4"' \
    owner-watch "$owner_pid" "$owner_started" "$CP_HERE/down.sh" "$run" "$CP_HERE/lib.sh"
fi

started_ok=1
cp_log "control plane up: $api_url (env: $run/env)"
