#!/usr/bin/env bash
# Checks formatting (clang-format) and runs the project's clang-tidy checks over every
# unit the build compiles, using the compile commands of a configured preset (default: ci);
# gofmt and go vet on the Go programs of the test bed (e2e/controlplane), of the benchmarks
# (bench/peers/cert-controller) and the example webhook (examples/webhook).
# clang-tidy results are cached outside the clone (CERTCTL_CACHE_DIR, default
# ~/.cache/certctl): a unit is checked again only when its inputs changed. The key of a unit
# is the hash of its preprocessed source (every header it includes, as clang sees it, with
# its compile flags), its compile command, .clang-tidy, the clang-tidy version and the
# arguments below; paths inside the clone are taken relative to it, so every clone shares
# the cache. Only clean results are kept: a unit that failed is checked (and printed) again.
# Usage: scripts/lint.sh [--fix]
# Env:   CERTCTL_TIDY_CACHE=0  check every unit
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

# The Go programs of the test bed and the benchmarks, each a module of its own. The vet
# results sit in Go's build cache: an unchanged tree is checked again in seconds.
go_modules=(e2e/controlplane bench/peers/cert-controller bench/fleet/cainjector examples/webhook)
if $fix; then
  gofmt -w "${go_modules[@]}"
else
  unformatted=$(gofmt -l "${go_modules[@]}")
  [[ -z $unformatted ]] || {
    echo "lint: gofmt would change: $unformatted" >&2
    exit 1
  }
fi
for module in "${go_modules[@]}"; do
  (cd "$module" && go vet ./...)
done

build=build/ci
[[ -f $build/compile_commands.json ]] || cmake --preset ci >/dev/null
# The units the build compiles, each a source of this clone or a batch of them
# (cmake/batches.cmake): a batch is checked as one unit, its diagnostics named by file.
mapfile -t units < <(/usr/bin/python3 - "$build/compile_commands.json" "$PWD" <<'PY'
import json, os, sys

commands, root = sys.argv[1:3]
for entry in json.load(open(commands)):
    path = os.path.relpath(os.path.join(entry["directory"], entry["file"]), root)
    if not path.startswith(".."):
        print(path)
PY
)
tidy_args=(-extra-arg=-Wno-unknown-warning-option)

# Without run-clang-tidy (which parallelises) or a cache, plain clang-tidy checks everything.
if ! command -v run-clang-tidy >/dev/null; then
  clang-tidy --quiet "${tidy_args[@]/#-/--}" -p "$build" "${units[@]}"
  echo "lint: ${#sources[@]} files formatted, ${#units[@]} translation units tidy"
  exit 0
fi

cache=${CERTCTL_CACHE_DIR:-$HOME/.cache/certctl}/clang-tidy
keys=$build/clang-tidy.keys
rm -f "$keys"
# clang-tidy 14 parses as clang 14 does (scripts/setup.sh installs clang-14).
clang=$(command -v clang++-14 || command -v clang++ || true)
if [[ ${CERTCTL_TIDY_CACHE:-1} != 0 && -n $clang ]]; then
  mkdir -p "$cache"
  # Results not used for 30 days go; a hit below renews its date.
  find "$cache" -type f -mtime +30 -delete
  # What every key shares: the checks, the clang-tidy that runs them, how it is called.
  common=$({
    cat .clang-tidy
    clang-tidy --version
    printf '%s\n' "${tidy_args[@]}"
  } | sha256sum | cut -c1-64)
  # One "KEY FILE" line per unit, computed in parallel: clang's preprocessor, the same
  # flags as the compile command (compiler, output and -c replaced), the clone's path
  # written as "." everywhere. A unit that does not preprocess gets no key and is checked.
  /usr/bin/python3 - "$build/compile_commands.json" "$PWD" "$common" "$clang" "${units[@]}" >"$keys" <<'PY'
import concurrent.futures, hashlib, json, os, shlex, subprocess, sys

commands, root, common, clang = sys.argv[1:5]
units = sys.argv[5:]
by_file = {os.path.realpath(e["file"]): e for e in json.load(open(commands))}


def key(unit):
    entry = by_file.get(os.path.realpath(os.path.join(root, unit)))
    if entry is None:
        return None
    argv = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    flags, skip = [], False
    for arg in argv[1:]:
        if skip:
            skip = False
        elif arg == "-o":
            skip = True
        elif arg != "-c" and arg != entry["file"]:
            flags.append(arg)
    proc = subprocess.run([clang, "-E", "-Wno-unknown-warning-option", *flags,
                           entry["file"]], cwd=entry["directory"], capture_output=True)
    if proc.returncode != 0:
        return None
    h = hashlib.sha256(common.encode())
    h.update(" ".join(flags).replace(root, ".").encode() + b"\0")
    h.update(proc.stdout.replace(root.encode(), b"."))
    return h.hexdigest()


with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
    for unit, k in zip(units, pool.map(key, units)):
        if k:
            print(k, unit)
PY
fi

# The units to check: those without a clean result under their key.
misses=()
declare -A key_of=()
for unit in "${units[@]}"; do
  key=
  [[ -f $keys ]] && key=$(awk -v u="$unit" '$2 == u { print $1; exit }' "$keys")
  if [[ -n $key && -f $cache/$key ]]; then
    touch "$cache/$key"
    continue
  fi
  misses+=("$unit")
  [[ -n $key ]] && key_of[$unit]=$key
done

if ((${#misses[@]} > 0)); then
  # run-clang-tidy parallelises over the misses (one job per core).
  run-clang-tidy -quiet "${tidy_args[@]}" -p "$build" "${misses[@]/#/$PWD/}" \
    >"$build/clang-tidy.log" 2>&1 || {
    grep -E "(error|warning):" "$build/clang-tidy.log" >&2 || cat "$build/clang-tidy.log" >&2
    exit 1
  }
  # Every miss was clean: remember each under its key.
  for unit in "${misses[@]}"; do
    [[ -n ${key_of[$unit]:-} ]] && : >"$cache/${key_of[$unit]}"
  done
fi
echo "lint: ${#sources[@]} files formatted, ${#units[@]} translation units tidy" \
  "($((${#units[@]} - ${#misses[@]})) unchanged since a clean check)"
