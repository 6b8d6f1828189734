#!/usr/bin/env bash
# The one command that runs every test: installs the package with its test extras, builds (or
# reuses from the cache) the real control plane the e2e tests run against, then runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'
# A failed build stops here, with the build script's message, instead of failing every e2e test.
env_lines="$(bash hack/build-control-plane.sh --print-env)"
eval "$env_lines"
exec python3 -m pytest "$@"
