#!/usr/bin/env bash
# Builds a release of certctl into dist/ from this clone, with Debian's packages only:
#   certctl-V-linux-amd64, certctl-V-linux-arm64   the static-pie executables (arm64
#                                                  cross-built, run once under qemu)
#   certctl-V-linux-ARCH.tar.gz                    each with LICENSE, for the kubectl plugin
#   certctl-V-linux-ARCH.spdx.json                 SPDX 2.3 SBOM of each executable
#   licenses/linux-ARCH/                           licence texts of what each one contains
#   certctl-V.oci.tar                              OCI archive: the two-architecture image
#                                                  index (tag V) and both images
#   certctl-V.index-digest                         the index's digest (sha256:...)
#   certctl-V.tgz                                  the Helm chart, its image pinned by digest
#   certctl.krew.yaml                              krew plugin manifest for the archives
#   cosign.pub                                     with CERTCTL_SIGNING_KEY: the public key
#                                                  that signs the release
#   SHA256SUMS                                     over every file above
#   SHA256SUMS.sig                                 with CERTCTL_SIGNING_KEY: its signature
#                                                  (cosign sign-blob)
# The registry the chart pins and the download URL the krew manifest names come from
# scripts/lib/release-settings.sh (CERTCTL_REGISTRY, CERTCTL_DOWNLOAD_URL); the release is
# built for one registry, and scripts/publish.sh pushes it there. CERTCTL_SIGNING_KEY (same
# file) is the cosign key that signs it; scripts/publish.sh then signs the image index and
# the chart in the registry with the same key.
#
# Usage: scripts/release.sh VERSION [--out DIR] [--reuse-builds]
#   VERSION         e.g. 0.2.0 or 0.2.0-rc.1; the executables, images and chart carry it
#   --out DIR       where the release goes (default dist/; emptied first)
#   --reuse-builds  take build/static/certctl and build/static-arm64/certctl as they are
#                   (they must already report VERSION) instead of building them
set -euo pipefail
# A signing key's path is the caller's, before the script moves to the clone.
[[ -z ${CERTCTL_SIGNING_KEY:-} ]] || CERTCTL_SIGNING_KEY=$(realpath -m -- "$CERTCTL_SIGNING_KEY")
cd "$(dirname "$0")/.."
root=$PWD
source scripts/lib/release-settings.sh

log() { echo "release: $*" >&2; }
die() { log "$*"; exit 1; }
usage="usage: scripts/release.sh VERSION [--out DIR] [--reuse-builds]"

version=
out=dist
reuse=false
while (($# > 0)); do
  case $1 in
    --out) out=${2:?--out needs a folder}; shift ;;
    --reuse-builds) reuse=true ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) log "unknown option '$1' ($usage)"; exit 2 ;;
    *) [[ -z $version ]] || { log "one VERSION only ($usage)"; exit 2; }; version=$1 ;;
  esac
  shift
done
[[ -n $version ]] || { log "$usage"; exit 2; }
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
  { log "VERSION '$version' is not a version like 1.2.3 or 1.2.3-rc.1"; exit 2; }

arches=(amd64 arm64)
host_arch=$(dpkg --print-architecture)
[[ $host_arch == amd64 ]] || die "releases are built on amd64 (this machine is $host_arch)"
export PATH="$root/.tools/bin:$PATH"
command -v helm >/dev/null || scripts/install-helm.sh >/dev/null
if [[ -n $CERTCTL_SIGNING_KEY ]]; then
  [[ -r $CERTCTL_SIGNING_KEY ]] || die "CERTCTL_SIGNING_KEY: cannot read $CERTCTL_SIGNING_KEY"
  [[ -n ${COSIGN_PASSWORD+set} ]] ||
    die "CERTCTL_SIGNING_KEY is set but COSIGN_PASSWORD is not (the key's password; empty for none)"
  scripts/install-go-tool.sh cosign
fi

# Everything is dated at the commit, so a release of one commit is the same every time.
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)
export SOURCE_DATE_EPOCH
commit=$(git rev-parse --short=12 HEAD)
[[ -z $(git status --porcelain --untracked-files=no) ]] ||
  log "warning: the work tree has uncommitted changes; the release says $commit-dirty"

started=$SECONDS
scripts/setup-arm64.sh

# 1. The executables: built for VERSION, or taken as built.
static_dir() { [[ $1 == "$host_arch" ]] && echo build/static || echo "build/static-$1"; }
run_on() {  # run_on ARCH EXECUTABLE ARGS...: another architecture's runs under qemu
  local arch=$1
  shift
  if [[ $arch == "$host_arch" ]]; then "$@"; else qemu-aarch64-static "$@"; fi
}
for arch in "${arches[@]}"; do
  if ! $reuse; then
    log "building the $arch executable"
    CERTCTL_VERSION=$version CERTCTL_COMMIT=$commit scripts/build-static.sh --arch "$arch"
  fi
  binary=$(static_dir "$arch")/certctl
  [[ -x $binary ]] || die "$binary is missing (scripts/build-static.sh --arch $arch)"
  reported=$(run_on "$arch" "$binary" version -o json |
    /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
  [[ $reported == "$version" ]] ||
    die "$binary reports version $reported, not $version (build it for the release: drop --reuse-builds)"
  # The soak's control build can switch safeties off; nothing built like it is released.
  ! grep -q CERTCTL_REMOVE_SAFETY "$binary" ||
    die "$binary has the soak's safety switches compiled in (CERTCTL_SAFETY_CONTROLS)"
done

# 2. One image per architecture (each also makes its SBOM and licence texts).
for arch in "${arches[@]}"; do
  scripts/build-image.sh --skip-static --arch "$arch"
done

rm -rf "$out"
mkdir -p "$out/licenses"
out=$(realpath "$out")

# 3. The executables, their archives, SBOMs and licences.
tar_deterministic() {  # tar_deterministic ARCHIVE DIR FILES...
  local archive=$1 dir=$2
  shift 2
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
    --mode='u+rwX,go+rX,go-w' -C "$dir" -c "$@" | gzip -n -9 >"$archive"
}
archives=()
for arch in "${arches[@]}"; do
  name=certctl-$version-linux-$arch
  binary=$(static_dir "$arch")/certctl
  install -m 0755 "$binary" "$out/$name"
  staging=$(mktemp -d)
  install -m 0755 "$binary" "$staging/certctl"
  install -m 0644 LICENSE "$staging/LICENSE"
  tar_deterministic "$out/$name.tar.gz" "$staging" certctl LICENSE
  rm -rf "$staging"
  archives+=("$out/$name.tar.gz")
  cp "build/image/$arch/sbom.spdx.json" "$out/$name.spdx.json"
  cp -r "build/image/$arch/context/licenses" "$out/licenses/linux-$arch"
done

# 4. The image index: both images under one tag, written as an OCI archive. Each image must
# stay small: it is pulled onto every node that runs a webhook pod.
index=localhost/certctl-release:$version
podman manifest rm "$index" >/dev/null 2>&1 || true
podman manifest create "$index" >/dev/null
for arch in "${arches[@]}"; do
  size=$(podman image inspect --format '{{.Size}}' "localhost/certctl:$version-$arch")
  ((size < 10000000)) || die "the $arch image is $size bytes, over the 10 MB limit"
  podman manifest add "$index" "containers-storage:localhost/certctl:$version-$arch" >/dev/null
done
oci_archive=$out/certctl-$version.oci.tar
podman manifest push --quiet --all --format oci "$index" \
  "oci-archive:$oci_archive:$version" >/dev/null
podman manifest rm "$index" >/dev/null
digest=$(tar -xOf "$oci_archive" index.json | /usr/bin/python3 -c '
import json, sys
manifests = json.load(sys.stdin)["manifests"]
assert len(manifests) == 1, manifests
assert manifests[0]["mediaType"] == "application/vnd.oci.image.index.v1+json", manifests[0]
print(manifests[0]["digest"])')
echo "$digest" >"$out/certctl-$version.index-digest"
log "image index $digest"

# 5. The chart: the release's version, the image by the index's digest in the registry.
chart_src=$(mktemp -d)
trap 'rm -rf "$chart_src"' EXIT
cp -r manifests/helm/certctl "$chart_src/certctl"
/usr/bin/python3 scripts/lib/pin-chart.py "$chart_src/certctl" --version "$version" \
  --repository "$CERTCTL_REGISTRY/certctl" --digest "$digest"
helm lint --quiet "$chart_src/certctl" --set webhook.service=lint \
  --set targets.webhookSelector=app=lint --set mode=job >/dev/null
helm package "$chart_src/certctl" --destination "$out" >/dev/null
rendered=$(helm template lint "$out/certctl-$version.tgz" --set webhook.service=lint \
  --set targets.webhookSelector=app=lint --set mode=job | grep -c "image: \"$CERTCTL_REGISTRY/certctl@$digest\"")
((rendered > 0)) || die "the packaged chart does not render the image by digest"

# 6. The krew manifest for the archives.
/usr/bin/python3 scripts/lib/krew-manifest.py --version "$version" \
  --url-base "$CERTCTL_DOWNLOAD_URL/v$version" --out "$out/certctl.krew.yaml" "${archives[@]}"

# 7. The public key of the signing key: what a user verifies the release with.
if [[ -n $CERTCTL_SIGNING_KEY ]]; then
  cosign public-key --key "$CERTCTL_SIGNING_KEY" --outfile "$out/cosign.pub" 2>/dev/null ||
    die "CERTCTL_SIGNING_KEY: $CERTCTL_SIGNING_KEY is no cosign private key, or COSIGN_PASSWORD is wrong"
fi

# 8. Checksums over everything, checked; signed, and the signature checked.
(cd "$out" && find . -type f ! -name SHA256SUMS -printf '%P\n' | LC_ALL=C sort |
  xargs -d '\n' sha256sum >SHA256SUMS && sha256sum --quiet -c SHA256SUMS)
if [[ -n $CERTCTL_SIGNING_KEY ]]; then
  # No transparency log: the release is verified with its public key alone.
  cosign sign-blob --yes --key "$CERTCTL_SIGNING_KEY" --tlog-upload=false \
    --output-signature "$out/SHA256SUMS.sig" "$out/SHA256SUMS" >/dev/null 2>&1 ||
    die "cosign could not sign $out/SHA256SUMS"
  cosign verify-blob --key "$out/cosign.pub" --insecure-ignore-tlog=true \
    --signature "$out/SHA256SUMS.sig" "$out/SHA256SUMS" >/dev/null 2>&1 ||
    die "the signature of $out/SHA256SUMS does not verify with $out/cosign.pub"
  log "signed with $CERTCTL_SIGNING_KEY (public key cosign.pub)"
else
  log "unsigned: CERTCTL_SIGNING_KEY names no key (docs/release.md, Signing)"
fi

log "release $version for $CERTCTL_REGISTRY in $out ($((SECONDS - started))s):"
(cd "$out" && find . -maxdepth 1 -type f -printf '  %P\n' | LC_ALL=C sort) >&2
