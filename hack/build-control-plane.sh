#!/usr/bin/env bash
# Builds (or reuses from the cache) the real control plane the e2e tests run against:
# kube-apiserver, kube-controller-manager, kubectl (k8s.io/kubernetes, from the wrapper module
# hack/controlplane/kubernetes/) and vc-scheduler, vc-controller-manager (volcano.sh/volcano, from
# hack/controlplane/volcano/, with the Kubernetes libraries of Volcano's own release), plus
# Volcano's CRDs taken from the Volcano module. Two modules because the Kubernetes under test is
# newer than the one a Volcano release is built with (hack/controlplane/README.md).
#
# Nothing fetched or built here goes into the repository. Everything lives in
#   ${REPACK_CACHE:-$HOME/.cache/kubectl-repack}/
#     go/mod, go/build                 Go module and build caches
#     controlplane/<key>/bin           the binaries
#     controlplane/<key>/crds/volcano  Volcano's CRDs
#     controlplane/<key>-node/bin      kubelet, kube-proxy, kube-scheduler: the e2e harness's real
#                                      node (built separately so that adding them never touched
#                                      the binaries above)
# where <key> names the Kubernetes and Volcano versions and a digest of both modules' go.mod/go.sum,
# so a version bump builds anew and an unchanged checkout reuses the binaries (idempotent).
#
# It also asks the Go module proxy whether Volcano's next minor (VOLCANO_NEXT) can be built: its
# volcano.sh/apis of the same minor must be served (printed, never fatal).
#
# Usage:
#   hack/build-control-plane.sh              build or reuse; print where things are
#   hack/build-control-plane.sh --print-env  same, but stdout carries only `export` lines
#                                            (REPACK_BIN_DIR, REPACK_CRD_DIR,
#                                            REPACK_NODE_BIN_DIR) for eval;
#                                            every other message goes to stderr
#   hack/build-control-plane.sh --force      rebuild even if the cache has the binaries
set -euo pipefail

PRINT_ENV=0
FORCE=0
for arg in "$@"; do
  case "$arg" in
    --print-env) PRINT_ENV=1 ;;
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "build-control-plane: unknown argument: $arg" >&2; exit 2 ;;
  esac
done

say() { echo "build-control-plane: $*" >&2; }
die() { echo "build-control-plane: error: $*" >&2; exit 1; }

HERE="$(cd "$(dirname "$0")" && pwd)"
K8S_MOD="$HERE/controlplane/kubernetes"
VOLCANO_MOD="$HERE/controlplane/volcano"
# Volcano's next minor: built the day its volcano.sh/apis is served (see probe_volcano_next).
VOLCANO_NEXT="v1.15.1"
CACHE="${REPACK_CACHE:-$HOME/.cache/kubectl-repack}"

command -v go >/dev/null 2>&1 || die "the 'go' command is not installed (Go >= 1.24 is needed to build the control plane)"
for m in "$K8S_MOD" "$VOLCANO_MOD"; do [ -f "$m/go.mod" ] || die "$m/go.mod is missing"; done

# The versions are the ones the wrapper modules require (`require X vN` or a line of a block).
required_version() {
  awk -v m="$2" '($1 == m && $2 ~ /^v/) { print $2; exit } ($1 == "require" && $2 == m) { print $3; exit }' "$1/go.mod"
}
K8S_VERSION="$(required_version "$K8S_MOD" k8s.io/kubernetes)"
VOLCANO_VERSION="$(required_version "$VOLCANO_MOD" volcano.sh/volcano)"
[ -n "$K8S_VERSION" ] || die "hack/controlplane/kubernetes/go.mod does not require k8s.io/kubernetes"
[ -n "$VOLCANO_VERSION" ] || die "hack/controlplane/volcano/go.mod does not require volcano.sh/volcano"
DIGEST="$(cat "$K8S_MOD/go.mod" "$K8S_MOD/go.sum" "$VOLCANO_MOD/go.mod" "$VOLCANO_MOD/go.sum" | sha256sum | cut -c1-12)"
KEY="k8s-${K8S_VERSION}_volcano-${VOLCANO_VERSION}_${DIGEST}"
OUT="$CACHE/controlplane/$KEY"
BIN_DIR="$OUT/bin"
CRD_DIR="$OUT/crds/volcano"
BINARIES="kube-apiserver kube-controller-manager kubectl vc-scheduler vc-controller-manager"
NODE_OUT="$OUT-node"
NODE_BIN_DIR="$NODE_OUT/bin"
NODE_BINARIES="kubelet kube-proxy kube-scheduler"

# The linker flags that give Kubernetes binaries their version (kubectl version, /version).
# Usage: k8s_ldflags VERSION
k8s_ldflags() {
  local version="$1" minor
  minor="${version#v1.}"; minor="${minor%%.*}"
  local k8s_pkg="k8s.io/component-base/version"
  printf '%s' "-s -w -X $k8s_pkg.gitVersion=$version -X $k8s_pkg.gitMajor=1 -X $k8s_pkg.gitMinor=$minor"
  printf '%s' " -X $k8s_pkg.gitTreeState=clean -X $k8s_pkg.buildDate=1970-01-01T00:00:00Z"
}

is_complete() {
  [ -f "$OUT/.complete" ] || return 1
  local b
  for b in $BINARIES; do [ -x "$BIN_DIR/$b" ] || return 1; done
  ls "$CRD_DIR"/*.yaml >/dev/null 2>&1 || return 1
}

# shellcheck source=hack/go-env.sh
. "$HERE/go-env.sh"

# Turns a failed go command's log into a message that names the module the proxy refused.
explain_go_failure() {
  local log="$1" what="$2" refused
  refused="$(grep -oE '[A-Za-z0-9._~/-]+@v[A-Za-z0-9.+-]+: (reading|verifying|unrecognized|invalid)[^"]*' "$log" | head -5 || true)"
  if [ -z "$refused" ]; then
    refused="$(grep -E '403 Forbidden|404 Not Found|410 Gone|not available|unknown revision|missing go.sum entry|no required module provides' "$log" | head -5 || true)"
  fi
  if [ -n "$refused" ]; then
    echo "build-control-plane: error: $what failed: the Go module proxy did not serve a module:" >&2
    echo "$refused" | sed 's/^/    /' >&2
    echo "  Change the pinned versions in hack/controlplane/{kubernetes,volcano}/go.mod (the require and replace" >&2
    echo "  lines) to versions the proxy serves, then run 'go mod tidy' there. Full log: $log" >&2
  else
    echo "build-control-plane: error: $what failed; last lines of $log:" >&2
    tail -n 30 "$log" | sed 's/^/    /' >&2
  fi
  exit 1
}

build() {
  mkdir -p "$OUT" "$CACHE/logs"
  local log="$CACHE/logs/build-$KEY.log" start end
  : > "$log"
  start=$(date +%s)
  say "building Kubernetes $K8S_VERSION and Volcano $VOLCANO_VERSION into $BIN_DIR"
  say "(a cold build takes a long time on 2 cores; log: $log)"

  local tmp="$OUT/bin.tmp"
  rm -rf "$tmp"; mkdir -p "$tmp"
  cd "$K8S_MOD"
  say "downloading the Kubernetes module's dependencies into $GOMODCACHE"
  if ! go mod download >>"$log" 2>&1; then
    explain_go_failure "$log" "go mod download (Kubernetes)"
  fi
  say "compiling Kubernetes $K8S_VERSION (go build -p 2)"
  if ! go build -p 2 -trimpath -ldflags "$(k8s_ldflags "$K8S_VERSION")" -o "$tmp/" \
      k8s.io/kubernetes/cmd/kube-apiserver \
      k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kubectl >>"$log" 2>&1; then
    explain_go_failure "$log" "go build (Kubernetes)"
  fi

  cd "$VOLCANO_MOD"
  say "downloading the Volcano module's dependencies into $GOMODCACHE"
  if ! go mod download >>"$log" 2>&1; then
    explain_go_failure "$log" "go mod download (Volcano)"
  fi
  # Volcano's binaries carry the Kubernetes libraries of its own release.
  local vk8s ldflags
  vk8s="$(required_version "$VOLCANO_MOD" k8s.io/kubernetes)"
  [ -n "$vk8s" ] || vk8s="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
  ldflags="$(k8s_ldflags "$vk8s")"
  ldflags+=" -X volcano.sh/volcano/pkg/version.Version=$VOLCANO_VERSION"
  ldflags+=" -X volcano.sh/volcano/pkg/version.GitSHA=module-$VOLCANO_VERSION"
  say "compiling Volcano $VOLCANO_VERSION (go build -p 2)"
  if ! go build -p 2 -trimpath -ldflags "$ldflags" -o "$tmp/" \
      volcano.sh/volcano/cmd/scheduler \
      volcano.sh/volcano/cmd/controller-manager >>"$log" 2>&1; then
    explain_go_failure "$log" "go build (Volcano)"
  fi
  # Volcano's mains are both called after their directory; give them their release names.
  mv "$tmp/scheduler" "$tmp/vc-scheduler"
  mv "$tmp/controller-manager" "$tmp/vc-controller-manager"

  local vdir
  vdir="$(go list -m -f '{{.Dir}}' volcano.sh/volcano)"
  [ -d "$vdir/installer/helm/chart/volcano/crd/bases" ] \
    || die "Volcano's CRDs are not at installer/helm/chart/volcano/crd/bases in $vdir"
  rm -rf "$OUT/crds.tmp"; mkdir -p "$OUT/crds.tmp/volcano"
  cp "$vdir"/installer/helm/chart/volcano/crd/bases/*.yaml "$OUT/crds.tmp/volcano/"
  chmod u+w "$OUT"/crds.tmp/volcano/*.yaml

  rm -rf "$BIN_DIR" "$OUT/crds"
  mv "$tmp" "$BIN_DIR"
  mv "$OUT/crds.tmp" "$OUT/crds"
  end=$(date +%s)
  {
    echo "kubernetes=$K8S_VERSION"
    echo "volcano=$VOLCANO_VERSION"
    echo "go=$(go env GOVERSION)"
    echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "seconds=$((end - start))"
  } > "$OUT/.complete"
  say "built in $((end - start)) s"
}

node_complete() {
  [ -f "$NODE_OUT/.complete" ] || return 1
  local b
  for b in $NODE_BINARIES; do [ -x "$NODE_BIN_DIR/$b" ] || return 1; done
}

# The real node's binaries: same module, same caches, same flags, their own directory.
build_node() {
  mkdir -p "$NODE_OUT" "$CACHE/logs"
  local log="$CACHE/logs/build-$KEY-node.log" start end
  : > "$log"
  start=$(date +%s)
  say "building kubelet, kube-proxy and kube-scheduler $K8S_VERSION into $NODE_BIN_DIR (log: $log)"
  # In a copy of the wrapper module: these mains need a few more go.sum lines (-mod=mod adds
  # them, checked against the checksum database), and the repository's go.sum is part of the
  # cache key of the binaries above, which must not change because the node was built.
  local mod="$NODE_OUT/mod"
  rm -rf "$mod"; mkdir -p "$mod"
  cp "$K8S_MOD/go.mod" "$K8S_MOD/go.sum" "$K8S_MOD/tools.go" "$mod/"
  cd "$mod"
  if ! go mod download >>"$log" 2>&1; then
    explain_go_failure "$log" "go mod download"
  fi
  local ldflags
  ldflags="$(k8s_ldflags "$K8S_VERSION")"
  local tmp="$NODE_OUT/bin.tmp"
  rm -rf "$tmp"; mkdir -p "$tmp"
  if ! go build -p 2 -trimpath -ldflags "$ldflags" -o "$tmp/" \
      k8s.io/kubernetes/cmd/kubelet \
      k8s.io/kubernetes/cmd/kube-proxy \
      k8s.io/kubernetes/cmd/kube-scheduler >>"$log" 2>&1; then
    explain_go_failure "$log" "go build (node binaries)"
  fi
  rm -rf "$NODE_BIN_DIR"
  mv "$tmp" "$NODE_BIN_DIR"
  end=$(date +%s)
  {
    echo "kubernetes=$K8S_VERSION"
    echo "go=$(go env GOVERSION)"
    echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "seconds=$((end - start))"
  } > "$NODE_OUT/.complete"
  say "node binaries built in $((end - start)) s"
}

# Volcano's next minor needs its volcano.sh/apis of the same minor, which the proxy may not serve
# (its own go.mod points that module at a staging directory left out of the module zip). Say which,
# so the day it is served a second Volcano leg can be added; never fatal, never vendored.
probe_volcano_next() {
  local gomod apis
  gomod="$(cd "$VOLCANO_MOD" && timeout 60 go mod download -json "volcano.sh/volcano@$VOLCANO_NEXT" 2>/dev/null \
           | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')" || true
  if [ -z "$gomod" ] || [ ! -f "$gomod" ]; then
    say "Volcano $VOLCANO_NEXT: volcano.sh/volcano@$VOLCANO_NEXT is not served: no second Volcano leg (testing $VOLCANO_VERSION)"
    return 0
  fi
  apis="$(awk '$1 == "volcano.sh/apis" && $2 ~ /^v/ { print $2; exit }' "$gomod")"
  if [ -n "$apis" ] && (cd "$VOLCANO_MOD" && timeout 60 go mod download "volcano.sh/apis@$apis" >/dev/null 2>&1); then
    say "Volcano $VOLCANO_NEXT: volcano.sh/apis@$apis is served: a Volcano ${VOLCANO_NEXT} leg can be added"
  else
    say "Volcano $VOLCANO_NEXT: it needs volcano.sh/apis@${apis:-?}, which the module proxy does not serve: no second Volcano leg (testing $VOLCANO_VERSION)"
  fi
}
probe_volcano_next

build_lock "$CACHE/controlplane" "$KEY"
if [ "$FORCE" = 1 ] || ! is_complete; then
  build
else
  say "reusing Kubernetes $K8S_VERSION and Volcano $VOLCANO_VERSION from $OUT"
fi
if [ "$FORCE" = 1 ] || ! node_complete; then
  build_node
else
  say "reusing kubelet, kube-proxy and kube-scheduler $K8S_VERSION from $NODE_OUT"
fi

if [ "$PRINT_ENV" = 1 ]; then
  printf 'export REPACK_BIN_DIR=%q\n' "$BIN_DIR"
  printf 'export REPACK_CRD_DIR=%q\n' "$CRD_DIR"
  printf 'export REPACK_NODE_BIN_DIR=%q\n' "$NODE_BIN_DIR"
else
  echo "binaries: $BIN_DIR"
  for b in $BINARIES; do echo "  $BIN_DIR/$b"; done
  echo "volcano CRDs: $CRD_DIR"
  echo "node binaries: $NODE_BIN_DIR"
  for b in $NODE_BINARIES; do echo "  $NODE_BIN_DIR/$b"; done
  echo "for the e2e tests: eval \"\$(bash hack/build-control-plane.sh --print-env)\""
fi
