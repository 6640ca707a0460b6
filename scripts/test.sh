#!/usr/bin/env bash
# Runs every test: the unit tests in an optimised build and again under AddressSanitizer +
# UndefinedBehaviorSanitizer, the latter beside a bounded run of every fuzz target and the
# quick form of the peers benchmark (bench/peers/run.py --quick), the release of the
# project's version (scripts/release.sh: static executables for amd64 and arm64, images,
# chart, SBOMs), then the end-to-end tests with the linters (clang-format, clang-tidy,
# gofmt, go vet) beside them. Installs what is missing first. Says what to expect at its
# start and ends with the wall time of each stage (docs/ci.md).
# Usage: scripts/test.sh [--quick]   (--quick: optimised build only, no sanitizers, no fuzzing,
#                                     no peers benchmark, no release, no node tier)
# Env:   CERTCTL_FUZZ_SECONDS  seconds each fuzz target runs (default 15; 0 skips fuzzing,
#                              not the peers benchmark).
#                              Short, because each run starts from the corpus the previous
#                              ones grew (scripts/fuzz.sh keeps it in CERTCTL_CACHE_DIR)
#        CERTCTL_CACHE_DIR     caches kept between runs, outside the clone (default
#                              ~/.cache/certctl): ccache, clang-tidy results, fuzz corpora,
#                              e2e durations
set -euo pipefail
cd "$(dirname "$0")/.."

quick=false
[[ ${1:-} == --quick ]] && quick=true

# stage NAME COMMAND...: runs one stage under a heading and records its wall time; the table
# is printed at the end, and also when a stage fails (the failing one is marked), beside the
# same stage's time in the last whole run on this machine. While a stage runs, a line every
# 20 s says it still runs (scripts/lib/progress.sh); STAGE_LOG, when set, is a file whose
# last line that line repeats (the end-to-end tests write their count there).
source scripts/lib/progress.sh
cache_dir=${CERTCTL_CACHE_DIR:-$HOME/.cache/certctl}
# The stage times of the last run that passed, "SECONDS<TAB>STAGE" a line.
last_times=$cache_dir/test-stage-times.tsv
$quick && last_times=$cache_dir/test-stage-times-quick.tsv
declare -A last=()
if [[ -r $last_times ]]; then
  while IFS=$'\t' read -r seconds name; do last[$name]=$seconds; done <"$last_times"
fi
stages=()
times=()
stage() {
  local name=$1 started=$SECONDS
  shift
  stages+=("$name")
  current_stage=$name current_start=$started
  progress_stage "$name" "${STAGE_LOG:-}"
  "$@"
  times+=("$((SECONDS - started))")
  current_stage=
}
current_stage=
finished=false # set by the last line: a run stopped half-way records no times
test_start=$SECONDS
lint_pid=
kube_pid=
cosign_pid=
# kill_tree PID: PID and every process it started, children first.
kill_tree() {
  local child
  for child in $(pgrep -P "$1"); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}
summary() {
  local rc=$? i name
  # The linters, when the run stopped before it awaited them.
  [[ -n $lint_pid ]] && kill_tree "$lint_pid"
  [[ -n $kube_pid ]] && kill_tree "$kube_pid"
  [[ -n $cosign_pid ]] && kill_tree "$cosign_pid"
  progress_stop
  echo "== stage times (seconds; the last passing run on this machine beside them)"
  for i in "${!times[@]}"; do
    name=${stages[$i]}
    printf '  %-62s %5s %6s\n' "$name" "${times[$i]}" "${last[$name]:--}"
  done
  [[ -n $current_stage ]] &&
    printf '  %-62s %5s %6s  FAILED\n' "$current_stage" "$((SECONDS - current_start))" \
      "${last[$current_stage]:--}"
  printf '  %-62s %5s %6s\n' total "$((SECONDS - test_start))" "${last[total]:--}"
  if ((rc == 0)) && $finished && mkdir -p "$cache_dir"; then
    {
      for i in "${!times[@]}"; do printf '%s\t%s\n' "${times[$i]}" "${stages[$i]}"; done
      printf '%s\ttotal\n' "$((SECONDS - test_start))"
    } >"$last_times.tmp" && mv -f "$last_times.tmp" "$last_times"
  fi
  return "$rc"
}
trap summary EXIT
progress_start test 20
# What to expect: the last passing run here, or the figures of docs/ci.md on a new machine.
if [[ -n ${last[total]:-} ]]; then
  echo "test: the last passing run on this machine took $((last[total] / 60)) min" \
    "$((last[total] % 60)) s; expect about as long (docs/ci.md has the stages)"
elif $quick; then
  echo "test: no earlier --quick run on this machine: expect about 15 min warm (docs/ci.md)"
else
  echo "test: no earlier run on this machine: expect about 17 min with warm caches, 40 min" \
    "on a new machine (docs/ci.md)"
fi
$quick && echo "test: --quick leaves out the unit tests under sanitizers, fuzzing, the peers" \
  "benchmark and the release (and so the end-to-end tests of the image and the release)," \
  "and the node tier (e2e/tests/node: it builds certctl's image)"
# The node tier skips, saying why, when told to (E2E_NODE=0, e2e/harness/node.py).
$quick && export E2E_NODE=0

# Stages that wait for nothing of each other run at once, one in front, the others beside it.
beside_pids=() beside_names=() beside_logs=()
beside() { # beside NAME LOG COMMAND...: starts COMMAND in the background, output in LOG
  local name=$1 log=$2
  shift 2
  "$@" >"$log" 2>&1 &
  beside_pids+=("$!") beside_names+=("$name") beside_logs+=("$log")
}
await_beside() { # waits for every command started by beside; a failed one's log is shown
  local i failed=0
  for i in "${!beside_pids[@]}"; do
    if wait "${beside_pids[$i]}"; then
      echo "test: ${beside_names[$i]} passed (log: ${beside_logs[$i]})"
    else
      tail -n 60 "${beside_logs[$i]}"
      echo "test: ${beside_names[$i]} failed (the whole log: ${beside_logs[$i]})" >&2
      failed=1
    fi
  done
  beside_pids=() beside_names=() beside_logs=()
  return "$failed"
}

# The real API server of the end-to-end tests and the peers benchmark, and the node's
# programs, built once per machine and cached (CERTCTL_CACHE_DIR/controlplane, Go's own
# caches): a link of a few seconds after that. The build needs nothing but Go, so it starts
# first, at a lower priority: on a new machine it runs while setup waits on downloads and
# the C++ builds leave a core idle, and its stage below waits for what is left of it.
mkdir -p build
if [[ -x e2e/run.sh ]]; then
  nice -n 10 scripts/kube-up.sh --build >build/kube-build.log 2>&1 &
  kube_pid=$!
fi
await_kube() {
  local rc=0
  wait "$kube_pid" || rc=$?
  kube_pid=
  if ((rc != 0)); then
    tail -n 20 build/kube-build.log
    echo "test: the Kubernetes build failed (log: build/kube-build.log)" >&2
    return 1
  fi
  echo "test: Kubernetes is in $(tail -n 1 build/kube-build.log)"
}

stage "setup" scripts/setup.sh
# Tools the project installs itself (helm) live here.
export PATH="$PWD/.tools/bin:$PATH"
# Every C and C++ build below (build.sh, fuzz.sh, build-static.sh) compiles through ccache.
source scripts/lib/ccache.sh

stage "build (ci)" scripts/build.sh ci
# The linters need nothing but the ci build's compile commands: started now at the lowest
# priority, they take what every later stage leaves idle (cold, clang-tidy's quarter of an
# hour, most of it in the waits of the peers benchmark and the end-to-end tests; warm, a few
# seconds of cached results), and the end-to-end stage awaits them. Not in a session of
# their own: with the kernel's autogroups a new session gets an equal share of the cores
# whatever its nice value (measured: the asan build took twice as long beside it).
nice -n 19 scripts/lint.sh >build/lint.log 2>&1 &
lint_pid=$!
stage "unit tests (ci)" ctest --preset ci
$quick || stage "build (asan)" scripts/build.sh asan

if [[ -n $kube_pid ]]; then
  stage "Kubernetes (kube-apiserver, etcd, kubelet, controllers)" await_kube
fi

# One stage of three that do not wait for each other: the unit tests under ASan+UBSan, the
# peers benchmark's quick form (bench/peers/run.py --quick: every step still runs against
# each peer; its figures are not the report's, bench/peers/README.md), and the fuzzing,
# which is bounded by time rather than work: niced, it takes the cores the other two leave
# (its targets get fewer executions; each run goes on from the corpus the last one grew).
# The stage costs about the longest of them instead of their sum.
sanitized_tests_fuzzing_peers() {
  beside "unit tests (asan)" build/asan-unit-tests.log ctest --preset asan
  beside "peers benchmark (quick)" build/peers-quick.log \
    /usr/bin/python3 bench/peers/run.py --quick --certctl build/ci/certctl
  local fuzzed=0
  if [[ $fuzz_seconds != 0 ]]; then
    nice -n 10 scripts/fuzz.sh "$fuzz_seconds" || fuzzed=$?
  fi
  await_beside || return 1
  grep -E "tests passed|tests failed" build/asan-unit-tests.log
  sed -n '/^# certctl beside its peers/,$p' build/peers-quick.log
  return "$fuzzed"
}
fuzz_seconds=${CERTCTL_FUZZ_SECONDS:-15}
if ! $quick; then
  stage "unit tests (asan), fuzzing (${fuzz_seconds}s per target), peers benchmark (quick)" \
    sanitized_tests_fuzzing_peers
fi

# The release (skipped by --quick): the static executables for amd64 and arm64, built once
# here, the images with their SBOMs and licences, the two-architecture index, the chart
# pinned by digest, in dist/. The end-to-end tests in e2e/tests/image and e2e/tests/release
# read them, and the registry test publishes a release of the same executables.
if ! $quick; then
  version=$(sed -n 's/^project(certctl VERSION \([^ ]*\) .*/\1/p' CMakeLists.txt)
  stage "release $version (static executables, images, chart)" scripts/release.sh "$version"
fi

# The end-to-end tests leave most of the machine idle (their scenarios wait for events,
# outages and lifetimes): the linters, started after the ci build, finish beside them, and
# cosign, which only the release-signing tests use, is built beside them too on a machine
# that lacks it (they wait for it: scripts/install-go-tool.sh builds once for every caller).
end_to_end_and_lint() {
  local tested=0 linted=0
  if ! $quick; then
    nice -n 5 scripts/install-go-tool.sh cosign >build/cosign-build.log 2>&1 &
    cosign_pid=$!
  fi
  if [[ -x e2e/run.sh ]]; then
    e2e/run.sh build/ci/certctl || tested=$?
  fi
  if [[ -n $cosign_pid ]]; then
    # A failed build fails the signing tests, which show its log; this only reaps it.
    wait "$cosign_pid" || true
    cosign_pid=
  fi
  wait "$lint_pid" || linted=$?
  lint_pid=
  if ((linted != 0)); then
    tail -n 60 build/lint.log
    echo "test: lint (clang-format, clang-tidy, gofmt, go vet) failed (the whole log:" \
      "build/lint.log)" >&2
    return 1
  fi
  echo "test: lint (clang-format, clang-tidy, gofmt, go vet) passed (log: build/lint.log)"
  tail -n 1 build/lint.log
  return "$tested"
}
export E2E_PROGRESS=build/e2e-progress.log
: >"$E2E_PROGRESS"
STAGE_LOG=$E2E_PROGRESS stage "end-to-end tests, lint beside them" end_to_end_and_lint
finished=true
