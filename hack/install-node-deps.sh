#!/usr/bin/env bash
# Installs the Debian packages that the image build and the e2e tests' real node need, once:
#   buildah, runc        build hack/build-image.sh's images (RUN steps: hack/image/runc-no-rlimits,
#                        a python3 script)
#   mmdebstrap           builds the Debian base image when it is not in local storage
#   gcc, libc6-dev       the static pause program (hack/pause/pause.c)
#   containerd, runc, containernetworking-plugins, iptables, iproute2
#                        the node: container runtime, CNI bridge/host-local/loopback, kube-proxy
# Quick when everything is there (one dpkg query); needs root and apt (Debian bookworm).
set -euo pipefail
PACKAGES="buildah runc mmdebstrap gcc libc6-dev python3 containerd containernetworking-plugins iptables iproute2"
missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
  exit 0
fi
[ "$(id -u)" = 0 ] || { echo "install-node-deps: missing packages:$missing (run as root, or apt-get install them)" >&2; exit 1; }
command -v apt-get >/dev/null 2>&1 || { echo "install-node-deps: missing packages:$missing and no apt-get" >&2; exit 1; }
echo "install-node-deps: installing$missing" >&2
t0=$(date +%s)
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2
echo "install-node-deps: installed in $(( $(date +%s) - t0 )) s" >&2
