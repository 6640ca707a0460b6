#!/usr/bin/env bash
# Runs every test: the unit tests in an optimised build and again under AddressSanitizer +
# UndefinedBehaviorSanitizer, a bounded run of every fuzz target, the static executable and
# the container image, then the end-to-end tests. Installs what is missing first. Ends with
# the wall time of each stage.
# Usage: scripts/test.sh [--quick]   (--quick: optimised build only, no sanitizers, no fuzzing,
#                                     no image)
# Env:   CERTCTL_FUZZ_SECONDS  seconds each fuzz target runs (default 60; 0 skips fuzzing)
#        CERTCTL_CACHE_DIR     caches kept between runs, outside the clone (default
#                              ~/.cache/certctl): ccache, clang-tidy results, e2e durations
set -euo pipefail
cd "$(dirname "$0")/.."

quick=false
[[ ${1:-} == --quick ]] && quick=true

# stage NAME COMMAND...: runs one stage under a heading and records its wall time; the table
# is printed at the end, and also when a stage fails (the failing one is marked).
stages=()
stage() {
  local name=$1 started=$SECONDS
  shift
  echo "== $name"
  stages+=("$name")
  current_stage=$name current_start=$started
  "$@"
  times+=("$((SECONDS - started))")
  current_stage=
}
times=()
current_stage=
test_start=$SECONDS
summary() {
  local rc=$? i
  echo "== stage times"
  for i in "${!times[@]}"; do
    printf '  %-36s %5ss\n' "${stages[$i]}" "${times[$i]}"
  done
  [[ -n $current_stage ]] &&
    printf '  %-36s %5ss  FAILED\n' "$current_stage" "$((SECONDS - current_start))"
  printf '  %-36s %5ss\n' total "$((SECONDS - test_start))"
  return "$rc"
}
trap summary EXIT

stage "setup" scripts/setup.sh
# Tools the project installs itself (helm) live here.
export PATH="$PWD/.tools/bin:$PATH"
# Every C and C++ build below (build.sh, fuzz.sh, build-static.sh) compiles through ccache.
source scripts/lib/ccache.sh

presets=(ci)
$quick || presets+=(asan)

for preset in "${presets[@]}"; do
  stage "build ($preset)" scripts/build.sh "$preset"
  if [[ $preset == ci ]]; then
    stage "lint (clang-format, clang-tidy)" scripts/lint.sh
  fi
  stage "unit tests ($preset)" ctest --preset "$preset"
done

fuzz_seconds=${CERTCTL_FUZZ_SECONDS:-60}
if ! $quick && [[ $fuzz_seconds != 0 ]]; then
  stage "fuzzing (${fuzz_seconds}s per target)" scripts/fuzz.sh "$fuzz_seconds"
fi

# The static executable and the image built from it (skipped by --quick): the end-to-end
# tests in e2e/tests/image run them. Exit 3 from build-image.sh means podman cannot run
# containers on this machine: the image tests then skip, naming the reason, and the static
# executable is still tested without a container.
image() {
  local status=0
  scripts/build-image.sh --skip-static || status=$?
  if ((status == 3)); then
    echo "== no container image: podman cannot run containers here"
  elif ((status != 0)); then
    return "$status"
  fi
}
if ! $quick; then
  stage "static executable" scripts/build-static.sh
  stage "container image" image
fi

if [[ -x e2e/run.sh ]]; then
  stage "end-to-end tests" e2e/run.sh build/ci/certctl
fi
