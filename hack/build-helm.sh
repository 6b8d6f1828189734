#!/usr/bin/env bash
# Builds (or reuses from the cache) the pinned `helm` the chart e2e tests run
# (tests/e2e/test_helm.py): helm.sh/helm/v3/cmd/helm from the wrapper module in hack/helm/.
#
# Nothing fetched or built here goes into the repository. Everything lives in
#   ${REPACK_CACHE:-$HOME/.cache/kubectl-repack}/
#     go/mod, go/build        Go module and build caches (shared with build-control-plane.sh)
#     helm/<key>/bin/helm     the binary
# where <key> names the helm version and a digest of go.mod/go.sum, so a version bump builds anew
# and an unchanged checkout reuses the binary (idempotent).
#
# Usage:
#   hack/build-helm.sh              build or reuse; print where helm is
#   hack/build-helm.sh --print-env  same, but stdout carries only the `export REPACK_HELM=...`
#                                   line for eval; every other message goes to stderr
#   hack/build-helm.sh --force      rebuild even if the cache has the binary
set -euo pipefail

PRINT_ENV=0
FORCE=0
for arg in "$@"; do
  case "$arg" in
    --print-env) PRINT_ENV=1 ;;
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "build-helm: unknown argument: $arg" >&2; exit 2 ;;
  esac
done

say() { echo "build-helm: $*" >&2; }
die() { echo "build-helm: error: $*" >&2; exit 1; }

HERE="$(cd "$(dirname "$0")" && pwd)"
MOD_DIR="$HERE/helm"
CACHE="${REPACK_CACHE:-$HOME/.cache/kubectl-repack}"

command -v go >/dev/null 2>&1 || die "the 'go' command is not installed (helm $(awk '$1 == "go" { print $2 }' "$MOD_DIR/go.mod" 2>/dev/null) needs that Go or newer)"
[ -f "$MOD_DIR/go.mod" ] || die "$MOD_DIR/go.mod is missing"

HELM_MODULE=helm.sh/helm/v3
# `require M vX` on its own line, or `M vX` inside a require block.
HELM_VERSION="$(awk -v m="$HELM_MODULE" '$1 == "require" && $2 == m { print $3; exit }
  $1 == m && $2 ~ /^v/ { print $2; exit }' "$MOD_DIR/go.mod")"
[ -n "$HELM_VERSION" ] || die "hack/helm/go.mod does not require $HELM_MODULE"
# This script is part of the digest too: a change to how helm is built (its ldflags) builds anew.
DIGEST="$(cat "$MOD_DIR/go.mod" "$MOD_DIR/go.sum" "$HERE/build-helm.sh" | sha256sum | cut -c1-12)"
KEY="helm-${HELM_VERSION}_${DIGEST}"
OUT="$CACHE/helm/$KEY"
BIN="$OUT/bin/helm"

# shellcheck source=hack/go-env.sh
. "$HERE/go-env.sh"     # the build runs in a copy of the module (see build())

explain_go_failure() {
  local log="$1" what="$2" refused
  refused="$(grep -E '403 Forbidden|404 Not Found|410 Gone|not available|unknown revision|missing go.sum entry|no required module provides|requires go >=' "$log" | head -5 || true)"
  if [ -n "$refused" ]; then
    echo "build-helm: error: $what failed:" >&2
    echo "$refused" | sed 's/^/    /' >&2
    echo "  Pin a helm version the Go module proxy serves (and the local Go can build) in" >&2
    echo "  hack/helm/go.mod, then run 'GOFLAGS=-mod=mod go mod tidy' there. Full log: $log" >&2
  else
    echo "build-helm: error: $what failed; last lines of $log:" >&2
    tail -n 30 "$log" | sed 's/^/    /' >&2
  fi
  exit 1
}

is_complete() { [ -f "$OUT/.complete" ] && [ -x "$BIN" ]; }

build() {
  mkdir -p "$OUT" "$CACHE/logs"
  local log="$CACHE/logs/build-$KEY.log" start end
  : > "$log"
  start=$(date +%s)
  say "building helm $HELM_VERSION into $OUT/bin (log: $log)"
  # In a copy of the wrapper module, so that nothing the go command writes lands in the repository.
  local mod="$OUT/mod"
  rm -rf "$mod"; mkdir -p "$mod"
  cp "$MOD_DIR/go.mod" "$MOD_DIR/go.sum" "$MOD_DIR/tools.go" "$mod/"
  cd "$mod"
  if ! go mod download >>"$log" 2>&1; then
    explain_go_failure "$log" "go mod download"
  fi
  local tmp="$OUT/bin.tmp" ldflags
  # The version `helm version` prints (helm's Makefile sets the same variables).
  ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  # The Kubernetes version `helm template` and `helm lint` assume without a cluster: the client-go
  # minor helm is built with, as helm's Makefile sets it (unset, helm assumes v1.20 and refuses a
  # chart whose kubeVersion needs more).
  local cg cg_major cg_minor
  cg="$(go list -f '{{.Version}}' -m k8s.io/client-go)"
  cg_major=1; cg_minor="${cg#v0.}"; cg_minor="${cg_minor%%.*}"   # client-go v0.N is Kubernetes 1.N
  local pkg
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    ldflags+=" -X $pkg.k8sVersionMajor=$cg_major -X $pkg.k8sVersionMinor=$cg_minor"
  done
  rm -rf "$tmp"; mkdir -p "$tmp"
  if ! go build -p 2 -trimpath -ldflags "$ldflags" -o "$tmp/helm" "$HELM_MODULE/cmd/helm" >>"$log" 2>&1; then
    explain_go_failure "$log" "go build"
  fi
  rm -rf "$OUT/bin"
  mv "$tmp" "$OUT/bin"
  end=$(date +%s)
  {
    echo "helm=$HELM_VERSION"
    echo "go=$(go env GOVERSION)"
    echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "seconds=$((end - start))"
  } > "$OUT/.complete"
  say "built in $((end - start)) s"
}

build_lock "$CACHE/helm" "$KEY"
if [ "$FORCE" = 1 ] || ! is_complete; then
  build
else
  say "reusing helm $HELM_VERSION from $OUT"
fi

if [ "$PRINT_ENV" = 1 ]; then
  printf 'export REPACK_HELM=%q\n' "$BIN"
else
  echo "helm: $BIN"
  echo "for the e2e tests: eval \"\$(bash hack/build-helm.sh --print-env)\""
fi
