#!/usr/bin/env bash
# Runs the end-to-end suite against the Kubernetes API emulator, on E2E_WORKERS pytest-xdist
# workers (every test is independent: its own emulator, ports, folders and names).
# Usage: e2e/run.sh [CERTCTL_BINARY] [pytest args...]   (default binary: build/ci/certctl;
# without pytest args the whole e2e/ tree runs)
# Env:   E2E_WORKERS       parallel workers (default 2; 0 runs serially, in this process)
#        E2E_TEST_TIMEOUT  seconds per test (default 60, see e2e/conftest.py)
#        E2E_PROGRESS      a file that gets a line "N of M tests run, F failed" after each test
#        E2E_NODE=0        leaves out the node tier (e2e/tests/node), which needs root and
#                          builds certctl's image
set -euo pipefail
cd "$(dirname "$0")/.."

binary=${1:-build/ci/certctl}
[[ $# -gt 0 ]] && shift
CERTCTL_BINARY=$(realpath -m "$binary")
export CERTCTL_BINARY
export PYTHONDONTWRITEBYTECODE=1
# Each test is limited to E2E_TEST_TIMEOUT seconds by e2e/conftest.py.
export E2E_TEST_TIMEOUT=${E2E_TEST_TIMEOUT:-60}
# The durations of the last run, outside the clone: the next one starts the longest first.
export E2E_DURATIONS=${E2E_DURATIONS:-${CERTCTL_CACHE_DIR:-$HOME/.cache/certctl}/e2e-durations.json}

# 2 workers by default: on 2 shared cores 3 workers made timing-bound tests fail and won
# little (docs/ci.md). --dist load hands out single tests, longest first (e2e/conftest.py).
workers=${E2E_WORKERS:-2}
parallel=()
if [[ $workers != 0 ]]; then
  if /usr/bin/python3 -c 'import xdist' 2>/dev/null; then
    parallel=(-n "$workers" --dist load)
  else
    echo "e2e: pytest-xdist is not installed (scripts/setup.sh): running serially" >&2
  fi
fi

[[ $# -gt 0 ]] || set -- e2e
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider "${parallel[@]}" "$@"
