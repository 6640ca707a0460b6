#!/usr/bin/env bash
# Configures and builds one CMake preset (default: dev), through ccache when it is installed
# (scripts/lib/ccache.sh). With --target, builds only the named targets of the preset (e.g.
# `scripts/build.sh ci --target certctl`: the executable, none of the tests or benchmarks).
# Usage: scripts/build.sh [PRESET] [--target TARGET]...
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/ccache.sh
preset=dev
targets=()
while (($# > 0)); do
  case $1 in
    --target)
      (($# >= 2)) || { echo "build.sh: --target needs a target name" >&2; exit 2; }
      targets+=(--target "$2")
      shift 2
      ;;
    -*) echo "build.sh: unknown option $1 (usage: scripts/build.sh [PRESET] [--target TARGET]...)" >&2; exit 2 ;;
    *) preset=$1; shift ;;
  esac
done
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" "${targets[@]}"
