#!/usr/bin/env bash
# Builds the webhook/coordinator image from ./Containerfile with buildah, reproducibly, and
# exports it as an OCI archive; also builds the e2e node's pause image (hack/pause/).
#
# Usage:
#   hack/build-image.sh [options]
#     --tag REF             local name of the image (default localhost/kubectl-repack/repack-webhook:<version>)
#     --platform OS/ARCH    linux/amd64 or linux/arm64 (default: this machine's). Another
#                           architecture needs qemu-user-static binfmt handlers for the RUN steps.
#     --base IMAGE          base image (default docker.io/library/debian:bookworm-slim). When it is
#                           not in local storage it is built from Debian packages with
#                           `mmdebstrap --variant=minbase bookworm` and tagged under this name;
#                           to use Debian's published image instead, `buildah pull` it first.
#     --push REF            also push the image to REF (a registry reference, or any containers
#                           transport such as oci:DIR:TAG; log in with `buildah login` first) and
#                           print REPOSITORY@sha256:<digest> for `kubectl repack install --image`
#     --out DIR             where the OCI archives go (default ${REPACK_CACHE:-~/.cache/kubectl-repack}/image/<arch>)
#     --no-cache            rebuild every step (default: reuse unchanged steps)
#     --check-reproducible  build twice from scratch (--no-cache) and fail unless both give the
#                           same manifest digest; prints both digests
#     --no-pause            skip the pause image
#     --print-env           stdout carries only `export` lines for eval (REPACK_IMAGE,
#                           REPACK_IMAGE_DIGEST, REPACK_IMAGE_ARCHIVE, REPACK_PAUSE_IMAGE,
#                           REPACK_PAUSE_ARCHIVE); every other message goes to stderr
#
# Reproducible: SOURCE_DATE_EPOCH (default: the commit time of HEAD) sets every timestamp
# (buildah --timestamp, the project's wheel, dpkg, py_compile); Python dependencies are the
# pinned, hash-checked wheels of hack/image/requirements.txt, downloaded on the host (PyPI may sit
# behind a TLS-intercepting proxy the build containers do not trust) and installed with
# --no-index. The Debian packages of the RUN steps come from the base image's apt sources.
#
# Needs root (or a rootless buildah setup), buildah, runc, and for a missing base mmdebstrap; RUN
# steps use hack/image/runc-no-rlimits, runc without process.rlimits (no CAP_SYS_RESOURCE here).
set -euo pipefail

say() { echo "build-image: $*" >&2; }
die() { echo "build-image: error: $*" >&2; exit 1; }

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
CACHE="${REPACK_CACHE:-$HOME/.cache/kubectl-repack}"
# The one place the version is written (setup.py reads it from there too).
VERSION="$(sed -n 's/^__version__ = "\([^"]*\)".*/\1/p' "$REPO/kubectl_repack/__init__.py" | head -1)"
[ -n "$VERSION" ] || die "cannot read __version__ from kubectl_repack/__init__.py"

TAG="localhost/kubectl-repack/repack-webhook:$VERSION"
PAUSE_TAG="localhost/kubectl-repack/pause:1"
BASE="docker.io/library/debian:bookworm-slim"
PLATFORM=""
PUSH=""
OUT=""
NO_CACHE=0
CHECK=0
PAUSE=1
PRINT_ENV=0
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) TAG="$2"; shift 2 ;;
    --platform) PLATFORM="$2"; shift 2 ;;
    --base) BASE="$2"; shift 2 ;;
    --push) PUSH="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --no-cache) NO_CACHE=1; shift ;;
    --check-reproducible) CHECK=1; shift ;;
    --no-pause) PAUSE=0; shift ;;
    --print-env) PRINT_ENV=1; shift ;;
    -h|--help) sed -n '2,/^set /{/^#/p}' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done

host_arch() {
  case "$(uname -m)" in
    x86_64) echo amd64 ;;
    aarch64|arm64) echo arm64 ;;
    *) uname -m ;;
  esac
}
[ -n "$PLATFORM" ] || PLATFORM="linux/$(host_arch)"
ARCH="${PLATFORM#linux/}"
case "$ARCH" in
  amd64) WHEEL_PLATFORM=manylinux2014_x86_64 ;;
  arm64) WHEEL_PLATFORM=manylinux2014_aarch64 ;;
  *) die "unsupported platform $PLATFORM (linux/amd64 or linux/arm64)" ;;
esac
[ -n "$OUT" ] || OUT="$CACHE/image/$ARCH"

for tool in buildah runc; do
  command -v "$tool" >/dev/null 2>&1 \
    || die "'$tool' is not installed (Debian: apt-get install buildah runc; hack/install-node-deps.sh does it)"
done
PY="${PYTHON:-python3}"
"$PY" -m pip --version >/dev/null 2>&1 || die "$PY has no pip (needed to download the pinned wheels)"

if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH="$(git -C "$REPO" log -1 --format=%ct 2>/dev/null || true)"
  [ -n "$SOURCE_DATE_EPOCH" ] || SOURCE_DATE_EPOCH=0
fi
export SOURCE_DATE_EPOCH
REVISION="$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)"
RUNTIME="$HERE/image/runc-no-rlimits"

mkdir -p "$OUT" "$CACHE/image"
# One build at a time on this machine (buildah's storage is shared; archives are rewritten).
exec 8>"$CACHE/image/.lock"
if ! flock -n 8; then
  say "another image build is running; waiting for it"
  flock 8
fi

timed() {  # timed NAME CMD... : runs CMD, reports its wall time on stderr
  local name="$1" t0 t1; shift
  t0=$(date +%s)
  "$@"
  t1=$(date +%s)
  say "$name: $((t1 - t0)) s"
}

image_exists() { buildah inspect --type image "$1" >/dev/null 2>&1; }

# ---- the base image ------------------------------------------------------------------------
build_base() {
  command -v mmdebstrap >/dev/null 2>&1 \
    || die "base image $BASE is not present and mmdebstrap is not installed to build it (apt-get install mmdebstrap)"
  local tmp ctr
  tmp="$(mktemp -d "$CACHE/image/base.XXXXXX")"
  say "base image $BASE not present: building it from Debian packages (mmdebstrap --variant=minbase bookworm, $ARCH)"
  # Like Debian's -slim images: no manual pages, no documentation besides copyright files.
  # A fixed epoch (not the commit's): the base depends only on the Debian packages, so machines
  # that build it from the same package versions get the same base.
  local epoch="${BASE_SOURCE_DATE_EPOCH:-1700000000}"
  SOURCE_DATE_EPOCH="$epoch" mmdebstrap --variant=minbase --arch="$ARCH" --quiet \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm "$tmp/rootfs.tar" >&2
  ctr="$(buildah from --platform "$PLATFORM" scratch)"
  buildah add --quiet "$ctr" "$tmp/rootfs.tar" / >/dev/null
  buildah config --os linux --arch "$ARCH" --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd bash --label "org.opencontainers.image.description=Debian bookworm minbase, built locally by kubectl-repack hack/build-image.sh" \
    "$ctr"
  buildah commit --quiet --timestamp "$epoch" --rm "$ctr" "$BASE" >/dev/null
  rm -rf "$tmp"
}
if image_exists "$BASE"; then
  say "base image $BASE: present"
else
  timed "base image" build_base
fi

# ---- the build context: pinned wheels + this project's wheel -------------------------------
REQS="$HERE/image/requirements.txt"
WHEEL_CACHE="$CACHE/image/wheels/$ARCH-$(sha256sum "$REQS" | cut -c1-12)"
CONTEXT="$OUT/context"

fetch_wheels() {
  if [ ! -f "$WHEEL_CACHE/.complete" ]; then
    rm -rf "$WHEEL_CACHE"; mkdir -p "$WHEEL_CACHE"
    say "downloading the pinned wheels ($WHEEL_PLATFORM, CPython 3.11) into $WHEEL_CACHE"
    "$PY" -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes \
      --only-binary=:all: --platform "$WHEEL_PLATFORM" --python-version 3.11 --implementation cp \
      --abi cp311 -r "$REQS" -d "$WHEEL_CACHE" >&2 \
      || die "pip could not download the wheels pinned in $REQS"
    touch "$WHEEL_CACHE/.complete"
  fi
  rm -rf "$CONTEXT"; mkdir -p "$CONTEXT/wheels"
  cp "$WHEEL_CACHE"/*.whl "$CONTEXT/wheels/"
  # The project's wheel, from a clean copy of the tracked and new (not ignored) files, so
  # nothing stale from an earlier in-tree build gets in.
  local src
  src="$(mktemp -d "$CACHE/image/src.XXXXXX")"
  (cd "$REPO" && git ls-files -z --cached --others --exclude-standard \
     | tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$src"
  PIP_CONSTRAINT="$HERE/image/build-constraints.txt" "$PY" -m pip wheel --quiet \
    --disable-pip-version-check --no-deps -w "$CONTEXT/wheels" "$src" >&2 \
    || die "building the project's wheel failed"
  rm -rf "$src"
}
timed "wheels" fetch_wheels

# ---- the image -----------------------------------------------------------------------------
build_one() {  # build_one TAG [--no-cache]
  local tag="$1"; shift
  buildah bud --quiet --layers --timestamp "$SOURCE_DATE_EPOCH" --platform "$PLATFORM" \
    --runtime "$RUNTIME" --network host "$@" \
    --build-arg "BASE_IMAGE=$BASE" --build-arg "SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH" \
    --build-arg "VERSION=$VERSION" --build-arg "REVISION=$REVISION" \
    -f "$REPO/Containerfile" -t "$tag" "$CONTEXT" >&2
}

export_archive() {  # export_archive TAG ARCHIVE -> prints the manifest digest
  local tag="$1" archive="$2" digest_file
  digest_file="$(mktemp)"
  rm -f "$archive.tmp"
  buildah push --quiet --digestfile "$digest_file" "$tag" "oci-archive:$archive.tmp:$tag" >&2
  mv "$archive.tmp" "$archive"
  cat "$digest_file"; rm -f "$digest_file"
}

if [ "$CHECK" = 1 ]; then
  say "reproducibility check: two builds without cache"
  t0=$(date +%s)
  build_one "$TAG" --no-cache
  d1="$(export_archive "$TAG" "$OUT/check-1.oci.tar")"
  t1=$(date +%s)
  build_one "$TAG" --no-cache
  d2="$(export_archive "$TAG" "$OUT/check-2.oci.tar")"
  t2=$(date +%s)
  say "first build:  $d1 ($((t1 - t0)) s)"
  say "second build: $d2 ($((t2 - t1)) s)"
  rm -f "$OUT/check-1.oci.tar"
  mv "$OUT/check-2.oci.tar" "$OUT/repack-webhook.oci.tar"
  [ "$d1" = "$d2" ] || die "the two builds differ: $d1 vs $d2"
  say "reproducible: both builds are $d1"
  DIGEST="$d1"
else
  no_cache=()
  [ "$NO_CACHE" = 1 ] && no_cache=(--no-cache)
  timed "image $TAG" build_one "$TAG" "${no_cache[@]}"
  DIGEST="$(export_archive "$TAG" "$OUT/repack-webhook.oci.tar")"
fi
say "image $TAG: $DIGEST, archive $OUT/repack-webhook.oci.tar"

if [ -n "$PUSH" ]; then
  digest_file="$(mktemp)"
  case "$PUSH" in
    docker://*|oci:*|oci-archive:*|dir:*|docker-archive:*|containers-storage:*) dest="$PUSH" ;;  # a transport given
    *) dest="docker://$PUSH" ;;
  esac
  buildah push --digestfile "$digest_file" "$TAG" "$dest" >&2 || die "pushing to $dest failed"
  pushed="$(cat "$digest_file")"; rm -f "$digest_file"
  say "pushed $dest ($pushed)"
  if [ "${dest#docker://}" != "$dest" ]; then
    repo="${dest#docker://}"
    last="${repo##*/}"
    case "$last" in *:*) repo="${repo%:*}" ;; esac  # drop the tag, keep a registry's :port
    echo "install with: kubectl repack install --image $repo@$pushed" >&2
  fi
fi

# ---- the pause image (the e2e node's sandbox) ------------------------------------------------
PAUSE_ARCHIVE=""
if [ "$PAUSE" = 1 ]; then
  [ "$ARCH" = "$(host_arch)" ] || die "the pause image is built for this machine only; add --no-pause with --platform $PLATFORM"
  command -v gcc >/dev/null 2>&1 || die "gcc is needed for the pause image (apt-get install gcc libc6-dev)"
  build_pause() {
    local ctx="$OUT/pause-context"
    rm -rf "$ctx"; mkdir -p "$ctx"
    gcc -static -Os -s -o "$ctx/pause" "$HERE/pause/pause.c"
    buildah bud --quiet --timestamp "$SOURCE_DATE_EPOCH" --platform "$PLATFORM" \
      -f "$HERE/pause/Containerfile" -t "$PAUSE_TAG" "$ctx" >&2
    export_archive "$PAUSE_TAG" "$OUT/pause.oci.tar" >/dev/null
  }
  timed "pause image" build_pause
  PAUSE_ARCHIVE="$OUT/pause.oci.tar"
fi

if [ "$PRINT_ENV" = 1 ]; then
  printf 'export REPACK_IMAGE=%q\n' "$TAG"
  printf 'export REPACK_IMAGE_DIGEST=%q\n' "$DIGEST"
  printf 'export REPACK_IMAGE_ARCHIVE=%q\n' "$OUT/repack-webhook.oci.tar"
  if [ -n "$PAUSE_ARCHIVE" ]; then
    printf 'export REPACK_PAUSE_IMAGE=%q\n' "$PAUSE_TAG"
    printf 'export REPACK_PAUSE_ARCHIVE=%q\n' "$PAUSE_ARCHIVE"
  fi
else
  echo "image:   $TAG ($DIGEST)"
  echo "archive: $OUT/repack-webhook.oci.tar"
  [ -z "$PAUSE_ARCHIVE" ] || echo "pause:   $PAUSE_TAG ($PAUSE_ARCHIVE)"
fi
