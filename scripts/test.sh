#!/usr/bin/env bash
# Runs every test: the unit tests in an optimised build and again under AddressSanitizer +
# UndefinedBehaviorSanitizer, a bounded run of every fuzz target, the static executable and
# the container image, then the end-to-end tests. Installs what is missing first.
# Usage: scripts/test.sh [--quick]   (--quick: optimised build only, no sanitizers, no fuzzing,
#                                     no image)
# Env:   CERTCTL_FUZZ_SECONDS  seconds each fuzz target runs (default 60; 0 skips fuzzing)
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

fuzz_seconds=${CERTCTL_FUZZ_SECONDS:-60}
if ! $quick && [[ $fuzz_seconds != 0 ]]; then
  echo "== fuzzing (${fuzz_seconds}s per target)"
  scripts/fuzz.sh "$fuzz_seconds"
fi

# The static executable and the image built from it (skipped by --quick): the end-to-end
# tests in e2e/tests/image run them. Exit 3 from build-image.sh means podman cannot run
# containers on this machine: the image tests then skip, naming the reason, and the static
# executable is still tested without a container.
if ! $quick; then
  echo "== static executable and container image"
  scripts/build-static.sh
  image_status=0
  scripts/build-image.sh --skip-static || image_status=$?
  if ((image_status == 3)); then
    echo "== no container image: podman cannot run containers here"
  elif ((image_status != 0)); then
    exit "$image_status"
  fi
fi

if [[ -x e2e/run.sh ]]; then
  echo "== end-to-end tests"
  e2e/run.sh build/ci/certctl
fi
