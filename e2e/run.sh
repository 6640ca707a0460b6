#!/usr/bin/env bash
# Runs the end-to-end suite against the Kubernetes API emulator.
# Usage: e2e/run.sh [CERTCTL_BINARY] [pytest args...]   (default binary: build/ci/certctl;
# without pytest args the whole e2e/ tree runs)
set -euo pipefail
cd "$(dirname "$0")/.."

binary=${1:-build/ci/certctl}
[[ $# -gt 0 ]] && shift
CERTCTL_BINARY=$(realpath -m "$binary")
export CERTCTL_BINARY
export PYTHONDONTWRITEBYTECODE=1
# Each test is limited to E2E_TEST_TIMEOUT seconds by e2e/conftest.py.
export E2E_TEST_TIMEOUT=${E2E_TEST_TIMEOUT:-60}

[[ $# -gt 0 ]] || set -- e2e
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider "$@"
