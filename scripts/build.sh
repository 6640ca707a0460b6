#!/usr/bin/env bash
# Configures and builds one CMake preset (default: dev), through ccache when it is installed
# (scripts/lib/ccache.sh). Usage: scripts/build.sh [PRESET]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/ccache.sh
preset=${1:-dev}
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
