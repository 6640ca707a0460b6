#!/usr/bin/env bash
# Runs every test: the unit tests in an optimised build and again under AddressSanitizer +
# UndefinedBehaviorSanitizer, then the end-to-end tests. Installs what is missing first.
# Usage: scripts/test.sh [--quick]   (--quick: optimised build only, no sanitizers)
set -euo pipefail
cd "$(dirname "$0")/.."

quick=false
[[ ${1:-} == --quick ]] && quick=true

scripts/setup.sh
# Tools the project installs itself (helm) live here.
export PATH="$PWD/.tools/bin:$PATH"

presets=(ci)
$quick || presets+=(asan)

for preset in "${presets[@]}"; do
  echo "== build ($preset)"
  scripts/build.sh "$preset"
  if [[ $preset == ci ]]; then
    echo "== lint (clang-format, clang-tidy)"
    scripts/lint.sh
  fi
  echo "== unit tests ($preset)"
  ctest --preset "$preset"
done

if [[ -x e2e/run.sh ]]; then
  echo "== end-to-end tests"
  e2e/run.sh build/ci/certctl
fi
