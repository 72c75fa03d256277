#!/usr/bin/env bash
# Builds the test control plane (etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager, kwok) and the Kubeflow training-operator's
# controllers from the Go module proxy into a cache that lives outside the
# repository and is keyed by version:
#
#   ${DRAGON_CONTROLPLANE_CACHE:-$HOME/.cache/dragon/controlplane}/
#     kubernetes-v1.37.2/{kube-apiserver,kube-scheduler,kube-controller-manager}
#     etcd-v3.6.16/etcd
#     kwok-v0.8.0/kwok
#     training-operator-v1.8.1-<hash of the wrapper>/{training-operator,crds/}
#     registry-v3.1.2/registry       CNCF Distribution, for policies in OCI
#     oras-v1.3.6/oras               a registry client Dragon did not write
#     helm-v4.3.2/helm               to render and install dragon-scheduler's chart
#     kueue-v0.17.0/{kueue,crds/,webhooks.yaml}  quota and admission in front
#     bin-<all versions>/   symlinks to the binaries above (and crds/ as
#                           training-operator-crds)
#
# Idempotent: a binary that is already in the cache is not rebuilt (so a warm
# run does not even need Go or the network). Progress goes to stderr; the
# last line of stdout is the bin directory to hand to up.sh.
#
# Versions come from the wrapper modules' go.mod files (one place to bump).
# Environment:
#   DRAGON_CONTROLPLANE_CACHE  cache root (default above)
#   DRAGON_CONTROLPLANE_NICE   niceness of go commands (default 19)
#   DRAGON_CONTROLPLANE_ONLY   space-separated subset of: kubernetes etcd kwok
#                              training-operator registry oras helm kueue
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${DRAGON_CONTROLPLANE_CACHE:-$HOME/.cache/dragon/controlplane}"
NICE="${DRAGON_CONTROLPLANE_NICE:-19}"
ONLY="${DRAGON_CONTROLPLANE_ONLY:-kubernetes etcd kwok training-operator registry oras helm kueue}"

log() { printf 'build.sh: %s\n' "$*" >&2; }
fail() {
  printf 'build.sh: FAILED at step "%s": %s\n' "$1" "$2" >&2
  exit 1
}

# version_of WRAPPER_DIR MODULE: the version a wrapper's go.mod requires.
version_of() {
  awk -v m="$2" '
    $1 == "require" && $2 == m { print $3; exit }
    $1 == m && $2 ~ /^v/       { print $2; exit }
  ' "$HERE/$1/go.mod"
}

KUBE_VERSION="$(version_of kubernetes k8s.io/kubernetes)"
ETCD_VERSION="$(version_of etcd go.etcd.io/etcd/server/v3)"
KWOK_VERSION="$(version_of kwok sigs.k8s.io/kwok)"
TO_VERSION="$(version_of training-operator github.com/kubeflow/training-operator)"
REGISTRY_VERSION="$(version_of registry github.com/distribution/distribution/v3)"
ORAS_VERSION="$(version_of oras oras.land/oras)"
HELM_VERSION="$(version_of helm helm.sh/helm/v4)"
KUEUE_VERSION="$(version_of kueue sigs.k8s.io/kueue)"
if [ -z "$KUBE_VERSION" ] || [ -z "$ETCD_VERSION" ] || [ -z "$KWOK_VERSION" ] || [ -z "$TO_VERSION" ] ||
  [ -z "$REGISTRY_VERSION" ] || [ -z "$ORAS_VERSION" ] || [ -z "$HELM_VERSION" ] || [ -z "$KUEUE_VERSION" ]; then
  fail "read versions" "could not read versions from $HERE/*/go.mod"
fi

KUBE_DIR="$CACHE/kubernetes-$KUBE_VERSION"
ETCD_DIR="$CACHE/etcd-$ETCD_VERSION"
KWOK_DIR="$CACHE/kwok-$KWOK_VERSION"
# The wrapper has a main of its own: its files are part of the key.
TO_HASH="$(cat "$HERE"/training-operator/{main.go,go.mod,go.sum} | sha256sum | cut -c1-12)"
TO_DIR="$CACHE/training-operator-$TO_VERSION-$TO_HASH"
REGISTRY_DIR="$CACHE/registry-$REGISTRY_VERSION"
ORAS_DIR="$CACHE/oras-$ORAS_VERSION"
HELM_DIR="$CACHE/helm-$HELM_VERSION"
KUEUE_DIR="$CACHE/kueue-$KUEUE_VERSION"
BIN_DIR="$CACHE/bin-kubernetes-$KUBE_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION-to-$TO_VERSION-$TO_HASH-registry-$REGISTRY_VERSION-oras-$ORAS_VERSION-helm-$HELM_VERSION-kueue-$KUEUE_VERSION"

wanted() { case " $ONLY " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# Checks done only when something must actually be built.
go_ready=""
need_go() {
  [ -n "$go_ready" ] && return 0
  command -v go >/dev/null 2>&1 ||
    fail "find go" "the go command is not on PATH (Go >= 1.26 is needed to build the control plane)"
  local gov
  gov="$(go env GOVERSION 2>/dev/null || true)"
  log "using $gov ($(command -v go)), GOMODCACHE=$(go env GOMODCACHE), GOCACHE=$(go env GOCACHE)"
  export CGO_ENABLED=0
  # Builds must use the committed go.sum, never rewrite it.
  export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly"
  go_ready=1
}

# fetch WRAPPER: download every module the wrapper's build needs, so that a
# network or proxy problem is reported as a fetch failure, not a compile one.
fetch() {
  local wrapper="$1" t0
  t0=$(date +%s)
  log "[$wrapper] fetching modules (go mod download)"
  if ! (cd "$HERE/$wrapper" && nice -n "$NICE" go mod download) >&2; then
    fail "fetch modules for $wrapper" \
      "Go could not fetch a module listed in $HERE/$wrapper/go.mod (checked against its go.sum) (is the Go module proxy reachable? GOPROXY=$(go env GOPROXY))"
  fi
  log "[$wrapper] modules fetched in $(($(date +%s) - t0))s"
}

# build WRAPPER PACKAGE OUT_DIR NAME LDFLAGS: go build into OUT_DIR/NAME,
# atomically (an interrupted build leaves no binary behind).
build() {
  local wrapper="$1" pkg="$2" out="$3" name="$4" ldflags="$5" t0 tmp
  if [ -x "$out/$name" ]; then
    log "[$wrapper] $name: cached at $out/$name"
    return 0
  fi
  mkdir -p "$out"
  tmp="$out/.$name.tmp.$$"
  t0=$(date +%s)
  log "[$wrapper] building $name ($pkg)"
  if ! (cd "$HERE/$wrapper" &&
    nice -n "$NICE" go build -trimpath -ldflags "$ldflags" -o "$tmp" "$pkg") >&2; then
    rm -f "$tmp"
    fail "build $name" "go build $pkg failed in $HERE/$wrapper (see the go output above)"
  fi
  mv -f "$tmp" "$out/$name"
  log "[$wrapper] built $name in $(($(date +%s) - t0))s"
}

missing() { # missing DIR NAME...: true if any binary is absent
  local d="$1"; shift
  for n in "$@"; do [ -x "$d/$n" ] || return 0; done
  return 1
}

KUBE_BINS=(kube-apiserver kube-scheduler kube-controller-manager)

if wanted kubernetes && missing "$KUBE_DIR" "${KUBE_BINS[@]}"; then
  need_go
  fetch kubernetes
  minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
  kube_ldflags="-s -w"
  for pkgvar in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    kube_ldflags+=" -X $pkgvar.gitVersion=$KUBE_VERSION"
    kube_ldflags+=" -X $pkgvar.gitMajor=1 -X $pkgvar.gitMinor=$minor"
    kube_ldflags+=" -X $pkgvar.gitTreeState=clean"
    kube_ldflags+=" -X $pkgvar.buildDate=1970-01-01T00:00:00Z"
  done
  for b in "${KUBE_BINS[@]}"; do
    build kubernetes "k8s.io/kubernetes/cmd/$b" "$KUBE_DIR" "$b" "$kube_ldflags"
  done
fi

if wanted etcd && missing "$ETCD_DIR" etcd; then
  need_go
  fetch etcd
  # etcd's version string is a constant in go.etcd.io/etcd/api/v3/version;
  # only the git SHA is stamped at release time.
  build etcd go.etcd.io/etcd/server/v3 "$ETCD_DIR" etcd \
    "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION"
fi

if wanted kwok && missing "$KWOK_DIR" kwok; then
  need_go
  fetch kwok
  build kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_DIR" kwok \
    "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}"
fi

if wanted training-operator && { missing "$TO_DIR" training-operator || [ ! -d "$TO_DIR/crds" ]; }; then
  need_go
  fetch training-operator
  build training-operator . "$TO_DIR" training-operator "-s -w"
  # Its CustomResourceDefinitions, from the same module, so that a warm run
  # needs neither Go nor the module cache.
  src="$(cd "$HERE/training-operator" && go list -m -f '{{.Dir}}' github.com/kubeflow/training-operator)/manifests/base/crds"
  [ -d "$src" ] || fail "copy CRDs" "$src is missing"
  rm -rf "$TO_DIR/crds.tmp.$$"
  mkdir -p "$TO_DIR/crds.tmp.$$"
  cp "$src"/kubeflow.org_*.yaml "$TO_DIR/crds.tmp.$$/"
  rm -rf "$TO_DIR/crds"
  mv "$TO_DIR/crds.tmp.$$" "$TO_DIR/crds"
fi

if wanted registry && missing "$REGISTRY_DIR" registry; then
  need_go
  fetch registry
  build registry github.com/distribution/distribution/v3/cmd/registry "$REGISTRY_DIR" registry \
    "-s -w -X github.com/distribution/distribution/v3/version.version=$REGISTRY_VERSION"
fi

if wanted oras && missing "$ORAS_DIR" oras; then
  need_go
  fetch oras
  build oras oras.land/oras/cmd/oras "$ORAS_DIR" oras \
    "-s -w -X oras.land/oras/internal/version.Version=${ORAS_VERSION#v}"
fi

if wanted helm && missing "$HELM_DIR" helm; then
  need_go
  fetch helm
  build helm helm.sh/helm/v4/cmd/helm "$HELM_DIR" helm \
    "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
fi

if wanted kueue && { missing "$KUEUE_DIR" kueue || [ ! -f "$KUEUE_DIR/webhooks.yaml" ]; }; then
  need_go
  fetch kueue
  build kueue sigs.k8s.io/kueue/cmd/kueue "$KUEUE_DIR" kueue \
    "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION"
  # Its CRDs (with the conversion-webhook patches its install applies) and
  # webhook configurations, from the same module, so that a warm run needs
  # neither Go nor the module cache.
  src="$(cd "$HERE/kueue" && go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)/config/components"
  [ -d "$src/crd/bases" ] || fail "copy Kueue manifests" "$src/crd/bases is missing"
  rm -rf "$KUEUE_DIR/crds.tmp.$$"
  mkdir -p "$KUEUE_DIR/crds.tmp.$$/patches"
  cp "$src"/crd/bases/*.yaml "$KUEUE_DIR/crds.tmp.$$/"
  # The patches its crd/kustomization.yaml applies (not resourceflavors').
  for crd in localqueues clusterqueues cohorts workloads multikueueclusters; do
    cp "$src/crd/patches/webhook_in_$crd.yaml" "$KUEUE_DIR/crds.tmp.$$/patches/"
  done
  cp "$src/webhook/manifests.yaml" "$KUEUE_DIR/webhooks.yaml.tmp.$$"
  rm -rf "$KUEUE_DIR/crds"
  mv "$KUEUE_DIR/crds.tmp.$$" "$KUEUE_DIR/crds"
  mv -f "$KUEUE_DIR/webhooks.yaml.tmp.$$" "$KUEUE_DIR/webhooks.yaml"
fi

# One directory holding all the binaries (symlinks into the versioned dirs).
mkdir -p "$BIN_DIR"
link() { [ -x "$1/$2" ] && ln -sfn "$1/$2" "$BIN_DIR/$2"; return 0; }
for b in "${KUBE_BINS[@]}"; do link "$KUBE_DIR" "$b"; done
link "$ETCD_DIR" etcd
link "$KWOK_DIR" kwok
link "$TO_DIR" training-operator
link "$REGISTRY_DIR" registry
link "$ORAS_DIR" oras
link "$HELM_DIR" helm
link "$KUEUE_DIR" kueue
[ -d "$KUEUE_DIR/crds" ] && ln -sfn "$KUEUE_DIR/crds" "$BIN_DIR/kueue-crds"
[ -f "$KUEUE_DIR/webhooks.yaml" ] && ln -sfn "$KUEUE_DIR/webhooks.yaml" "$BIN_DIR/kueue-webhooks.yaml"
[ -d "$TO_DIR/crds" ] && ln -sfn "$TO_DIR/crds" "$BIN_DIR/training-operator-crds"

log "kubernetes $KUBE_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION, training-operator $TO_VERSION, registry $REGISTRY_VERSION, oras $ORAS_VERSION, helm $HELM_VERSION, kueue $KUEUE_VERSION"
echo "$BIN_DIR"
