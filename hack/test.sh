#!/usr/bin/env bash
# The one command that runs every test: installs the package with its test extras, builds (or
# reuses from the cache) the real control plane the e2e tests run against and the pinned helm, and as root the
# Debian packages, the webhook image and the pause image of the e2e tests' real kubelet node;
# then runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp() { echo "test.sh: $1: $(( $(date +%s) - $2 )) s" >&2; }
# The pinned set of constraints.txt: the one the krew zipapp vendors and the image installs.
python3 -m pip install --quiet --disable-pip-version-check -e '.[test,webhook]' -c constraints.txt
# A failed build stops here, with the build script's message, instead of failing every e2e test.
t0=$(date +%s)
env_lines="$(bash hack/build-control-plane.sh --print-env)"
eval "$env_lines"
stamp "control plane and node binaries" "$t0"
# The pinned helm of the chart tests (tests/e2e/test_helm_template.py, tests/e2e/test_helm.py).
t0=$(date +%s)
helm_lines="$(bash hack/build-helm.sh --print-env)"
eval "$helm_lines"
stamp "helm" "$t0"
if [ "$(id -u)" = 0 ]; then
  t0=$(date +%s)
  bash hack/install-node-deps.sh
  stamp "Debian packages" "$t0"
  t0=$(date +%s)
  image_lines="$(bash hack/build-image.sh --print-env)"
  eval "$image_lines"
  stamp "images" "$t0"
else
  # The tests that need the real node (tests/e2e/test_installed.py) fail with a message saying so.
  echo "test.sh: not root: no image and no real node (tests/e2e/test_installed.py will fail)" >&2
fi
exec python3 -m pytest "$@"
