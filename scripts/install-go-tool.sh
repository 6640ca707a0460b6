#!/usr/bin/env bash
# Makes a Go program that the build or the tests use available as .tools/bin/NAME: the one
# pinned by scripts/go-tools/NAME/go.mod (its `tool` line names the package, go.sum every
# module). Built from the Go module proxy once per machine and Go version into the cache,
# outside the clone; later calls only link it. Idempotent and quiet: prints one line when it
# builds, nothing otherwise; exit 1 with a message on failure.
#
# Usage: scripts/install-go-tool.sh NAME...     e.g. helm-docs cosign
# Env:   CERTCTL_CACHE_DIR  where builds are kept (default ~/.cache/certctl), under
#                           go-tools/NAME-<hash of go.mod, go.sum and the Go version>
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
cache=${CERTCTL_CACHE_DIR:-$HOME/.cache/certctl}/go-tools

die() {
  echo "install-go-tool: $*" >&2
  exit 1
}

(($# > 0)) || die "usage: scripts/install-go-tool.sh NAME..."
command -v go >/dev/null || die "Go is not installed; install Go 1.26 or later (scripts/setup.sh says how)"

install_one() {
  local name=$1 sources=$repo/scripts/go-tools/$1 package key out link lock tmp
  [[ -f $sources/go.mod ]] || die "no scripts/go-tools/$name/go.mod"
  package=$(awk '$1 == "tool" {print $2; exit}' "$sources/go.mod")
  [[ -n $package ]] || die "scripts/go-tools/$name/go.mod names no tool"
  key=$(cat "$sources/go.mod" "$sources/go.sum" <(go env GOVERSION) | sha256sum | cut -c1-12)
  out=$cache/$name-$key/$name
  link=$repo/.tools/bin/$name
  if [[ ! -x $out ]]; then
    mkdir -p "$cache"
    # Parallel callers (test workers) build once: the second waits for the first.
    exec {lock}>"$cache/.$name.lock"
    flock "$lock"
    if [[ ! -x $out ]]; then
      tmp=$(mktemp -d "$cache/.build-$name.XXXXXX")
      # -mod=readonly: go.sum is the whole truth; a module it lacks is an error, not a fetch.
      if ! (cd "$sources" && go build -mod=readonly -trimpath -o "$tmp/$name" "$package") \
        >"$tmp/build.log" 2>&1; then
        cat "$tmp/build.log" >&2
        die "building $package failed"
      fi
      mkdir -p "$(dirname "$out")"
      mv "$tmp/$name" "$out"
      rm -rf "$tmp"
      echo "install-go-tool: built $name ($package, $(go env GOVERSION)) into $out" >&2
    fi
    exec {lock}>&-
  fi
  [[ $(readlink "$link" 2>/dev/null) == "$out" ]] && return
  mkdir -p "$(dirname "$link")"
  ln -sfn "$out" "$link"
}

for name in "$@"; do
  install_one "$name"
done
