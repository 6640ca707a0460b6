#!/usr/bin/env bash
# Checks formatting (clang-format) and runs the project's clang-tidy checks over every
# source file, using the compile commands of a configured preset (default: ci).
# Usage: scripts/lint.sh [--fix]
set -euo pipefail
cd "$(dirname "$0")/.."

fix=false
[[ ${1:-} == --fix ]] && fix=true

mapfile -t sources < <(git ls-files --cached --others --exclude-standard \
  '*.cc' '*.h' | grep -v '^build/')

if $fix; then
  clang-format -i "${sources[@]}"
else
  clang-format --dry-run -Werror "${sources[@]}"
fi

build=build/ci
[[ -f $build/compile_commands.json ]] || cmake --preset ci >/dev/null
mapfile -t units < <(printf '%s\n' "${sources[@]}" | grep '\.cc$')
# run-clang-tidy parallelises; plain clang-tidy is the fallback.
if command -v run-clang-tidy >/dev/null; then
  run-clang-tidy -quiet -extra-arg=-Wno-unknown-warning-option -p "$build" "${units[@]/#/$PWD/}" >"$build/clang-tidy.log" 2>&1 || {
    grep -E "(error|warning):" "$build/clang-tidy.log" >&2 || cat "$build/clang-tidy.log" >&2
    exit 1
  }
else
  clang-tidy --quiet --extra-arg=-Wno-unknown-warning-option -p "$build" "${units[@]}"
fi
echo "lint: ${#sources[@]} files formatted, ${#units[@]} translation units tidy"
