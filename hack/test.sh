#!/usr/bin/env bash
# The one command that runs every test: installs the package with its test extras, builds (or
# reuses from the cache) the real control plane the e2e tests run against, then runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# The pinned set of constraints.txt: the one the krew zipapp vendors and the image installs.
python3 -m pip install --quiet --disable-pip-version-check -e '.[test,webhook]' -c constraints.txt
# A failed build stops here, with the build script's message, instead of failing every e2e test.
env_lines="$(bash hack/build-control-plane.sh --print-env)"
eval "$env_lines"
exec python3 -m pytest "$@"
