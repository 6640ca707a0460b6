#!/usr/bin/env bash
# Builds the fuzz preset (clang, libFuzzer, AddressSanitizer + UndefinedBehaviorSanitizer) and
# runs every fuzz target of fuzz/ for a bounded time, as many at a time as there are cores
# (CERTCTL_FUZZ_PARALLEL), each for the full time. Each run starts from a scratch copy of the
# target's committed corpus (fuzz/corpus/<target>/, never written to) and of what earlier runs
# on this machine found (CERTCTL_CACHE_DIR/fuzz-corpus/<target>/), and uses
# fuzz/dict/<target>.dict. A run without a finding replaces that cached corpus with its own,
# so short runs go on from where the last one stopped instead of starting over. One summary line per target; exit 1, naming the
# input that crashed, if any target found a crash, a leak, a timeout or undefined behaviour.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET [TARGET...]]   (default: 60 s, every target)
# Env:   CERTCTL_FUZZ_JOBS      build parallelism (default 2)
#        CERTCTL_FUZZ_PARALLEL  targets run at the same time (default: the number of cores)
#        CERTCTL_CACHE_DIR      where the corpora found are kept (default ~/.cache/certctl)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/ccache.sh

seconds=${1:-60}
shift || true
[[ $seconds =~ ^[0-9]+$ && $seconds -gt 0 ]] || {
  echo "fuzz: SECONDS_PER_TARGET must be a positive number, not \"$seconds\"" >&2
  exit 2
}
if (($# > 0)); then
  targets=("$@")
else
  # Every target has a committed corpus folder: the list cannot forget one.
  targets=()
  for corpus in fuzz/corpus/*/; do
    corpus=${corpus%/}
    targets+=("${corpus##*/}")
  done
fi

build=build/fuzz
found=${CERTCTL_CACHE_DIR:-$HOME/.cache/certctl}/fuzz-corpus
cmake --preset fuzz >/dev/null
if ! cmake --build --preset fuzz -j "${CERTCTL_FUZZ_JOBS:-2}" >"$build/build.log" 2>&1; then
  cat "$build/build.log" >&2
  echo "fuzz: the build failed" >&2
  exit 1
fi
for target in "${targets[@]}"; do
  [[ -x $build/fuzz/fuzz_$target ]] || {
    echo "fuzz: no target \"$target\" (expected $build/fuzz/fuzz_$target)" >&2
    exit 2
  }
done

# Sanitizer reports stop the run at the first finding, with a stack.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Larger inputs only where the seeds are larger (certificates and keys).
max_len() {
  case $1 in
    pem) echo 8192 ;;
    *) echo 4096 ;;
  esac
}

# fuzz_one TARGET: one bounded run; its summary line goes to $run/summary, and what to show
# of a failure to $run/report. Runs in the background, so it only writes files.
fuzz_one() {
  local target=$1
  local run=$PWD/$build/run/$target
  rm -rf "$run"
  mkdir -p "$run/corpus" "$run/artifacts" "$run/tmp"
  cp fuzz/corpus/"$target"/* "$run/corpus/"
  # The cached corpus holds the committed seeds under their own names: each is copied once.
  if [[ -d $found/$target ]]; then
    find "$found/$target" -maxdepth 1 -type f -exec cp -t "$run/corpus/" {} +
  fi
  local args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048
    -max_len="$(max_len "$target")" -print_final_stats=1 -artifact_prefix="$run/artifacts/")
  [[ -f fuzz/dict/$target.dict ]] && args+=(-dict="$PWD/fuzz/dict/$target.dict")
  local rc=0
  # TMPDIR: anything a target writes goes to the scratch folder and is removed with it.
  TMPDIR=$run/tmp "$build/fuzz/fuzz_$target" "${args[@]}" "$run/corpus" >"$run/log" 2>&1 || rc=$?

  local execs rate status cov features corpus crash verdict
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$run/log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$run/log" | tail -n 1)
  status=$(grep -E '^#[0-9]+.*cov: ' "$run/log" | tail -n 1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$status")
  features=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$status")
  corpus=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$status")
  crash=$(find "$run/artifacts" -type f | head -n 1)
  if ((rc == 0)) && [[ -z $crash ]]; then
    verdict=ok
    # Copied beside the cache entry, then swapped in: an interrupted run, or another clone's
    # run at the same time, leaves a whole corpus behind.
    local tmp=$found/.$target.tmp.$BASHPID
    mkdir -p "$found"
    cp -r "$run/corpus" "$tmp"
    if [[ -d $found/$target ]]; then
      mv -T "$found/$target" "$tmp.old" 2>/dev/null || true
    fi
    mv -T "$tmp" "$found/$target" 2>/dev/null || true
    rm -rf "$tmp" "$tmp.old"
  else
    verdict="FAILED (exit $rc)"
  fi
  printf 'fuzz: %-15s %9s execs in %ss (%s/s), cov %s, ft %s, corpus %s inputs: %s\n' \
    "$target" "${execs:-?}" "$seconds" "${rate:-?}" "${cov:-?}" "${features:-?}" "${corpus:-?}" \
    "$verdict" >"$run/summary"
  if [[ $verdict != ok ]]; then
    {
      echo "--- $run/log (last 60 lines)"
      tail -n 60 "$run/log"
      if [[ -n $crash ]]; then
        echo "fuzz: $target: crashing input $crash"
        echo "fuzz: reproduce with: $build/fuzz/fuzz_$target $crash"
      fi
    } >"$run/report"
  fi
  rm -rf "$run/tmp"
}

# As many targets at a time as there are cores, each still for the full SECONDS: libFuzzer
# uses one core per run, and the runs share nothing but the read-only corpus and dictionary.
parallel=${CERTCTL_FUZZ_PARALLEL:-$(nproc)}
((parallel >= 1)) || parallel=1
running=0
for target in "${targets[@]}"; do
  if ((running >= parallel)); then
    wait -n || true
    running=$((running - 1))
  fi
  fuzz_one "$target" &
  running=$((running + 1))
done
wait

failed=()
for target in "${targets[@]}"; do
  run=$PWD/$build/run/$target
  if [[ -f $run/summary ]]; then
    cat "$run/summary"
  else
    echo "fuzz: $target: no result (the run did not finish)"
  fi
  if [[ -f $run/report || ! -f $run/summary ]]; then
    failed+=("$target")
    [[ -f $run/report ]] && cat "$run/report" >&2
  fi
done

if ((${#failed[@]} > 0)); then
  echo "fuzz: ${#failed[@]} of ${#targets[@]} targets failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${seconds}s each, no crash"
