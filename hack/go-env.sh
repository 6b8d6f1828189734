# Sourced by hack/build-control-plane.sh and hack/build-helm.sh: the one Go build environment both
# use, so the binaries they cache are built the same way and share one module and build cache.
# Needs CACHE (the repack cache directory) set by the caller.
export GOMODCACHE="${REPACK_GOMODCACHE:-$CACHE/go/mod}"
export GOCACHE="${REPACK_GOCACHE:-$CACHE/go/build}"
# -mod=mod: the committed go.sum is complete (`go mod tidy`) and is checked, never widened silently
# into the repository (builds that need more lines run in a copy of their wrapper module).
export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0
# Two cores on CI: keep the compiler from starving everything else.
export GOMAXPROCS="${REPACK_GOMAXPROCS:-2}"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

# One build at a time per cache key: a second caller waits for the first, then finds its output.
# Usage: build_lock DIR KEY (takes file descriptor 9 for the rest of the script).
build_lock() {
  mkdir -p "$1"
  exec 9>"$1/$2.lock"
  if ! flock -n 9; then
    say "another build of $2 is running; waiting for it"
    flock 9
  fi
}
