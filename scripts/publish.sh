#!/usr/bin/env bash
# Publishes a release built by scripts/release.sh to the registry it was built for:
#   certctl-V.oci.tar  the image index and both images -> REGISTRY/certctl:V, digest kept
#   certctl-V.tgz      the chart -> oci://REGISTRY/charts/certctl, version V
# First checks SHA256SUMS in the release folder, and that the chart pins REGISTRY/certctl at
# the index's digest; after the push, that the registry serves the index, each image and the
# chart byte for byte. A signed release (one with cosign.pub) is signed in the registry
# too: the image index and the chart, each by digest, with the key CERTCTL_SIGNING_KEY names
# (its password in COSIGN_PASSWORD), which must be the one the release was built with; then
# both signatures are verified with the release's cosign.pub. Pushing the same release again
# changes nothing (a signature that verifies is not made again). Installs skopeo (Debian)
# when it is missing, Helm (scripts/install-helm.sh) and cosign (scripts/install-go-tool.sh).
#
# Usage: scripts/publish.sh REGISTRY [DIST_DIR]
#   REGISTRY   host[:port][/namespace], the one the release was built for
#              (CERTCTL_REGISTRY of scripts/release.sh, default ghcr.io/certctl)
#   DIST_DIR   the release folder (default dist/; relative to the clone, as for release.sh)
# A loopback registry (127.0.0.1, localhost, [::1]) is spoken to in plain HTTP. Any other is
# reached over TLS with your existing credentials: log in first with
#   skopeo login HOST            (the image; podman login shares its credentials)
#   helm registry login HOST     (the chart)
#   .tools/bin/cosign login HOST (the signatures of a signed release; cosign also finds
#                                skopeo's login through REGISTRY_AUTH_FILE)
# Prints the image by digest, and the chart's reference and version.
set -euo pipefail
# A signing key's path is the caller's, before the script moves to the clone.
[[ -z ${CERTCTL_SIGNING_KEY:-} ]] || CERTCTL_SIGNING_KEY=$(realpath -m -- "$CERTCTL_SIGNING_KEY")

log() { echo "publish: $*" >&2; }
die() { log "$*"; exit 1; }
usage="usage: scripts/publish.sh REGISTRY [DIST_DIR]"

case ${1:-} in
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  "" | -*) log "$usage"; exit 2 ;;
esac
(($# <= 2)) || { log "$usage"; exit 2; }
registry=${1%/}
dist=${2:-dist}
[[ $registry != *://* ]] ||
  { log "REGISTRY is host[:port][/namespace], without a scheme: '$registry'"; exit 2; }
# As for scripts/release.sh --out, a relative DIST_DIR is in the clone.
cd "$(dirname "$0")/.."
[[ -d $dist ]] || die "no release folder $dist (scripts/release.sh VERSION)"
dist=$(realpath "$dist")

if [[ $(id -u) -ne 0 ]]; then
  sudo=sudo
else
  sudo=
fi
if ! command -v skopeo >/dev/null; then
  log "installing skopeo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get -o DPkg::Lock::Timeout=900 update -qq
  $sudo apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends skopeo >/dev/null
fi
export PATH="$PWD/.tools/bin:$PATH"
command -v helm >/dev/null || scripts/install-helm.sh >/dev/null

# 1. The release is whole and is the one for this registry.
[[ -f $dist/SHA256SUMS ]] || die "$dist/SHA256SUMS is missing: not a release folder"
(cd "$dist" && sha256sum --quiet --strict -c SHA256SUMS) ||
  die "$dist does not match its SHA256SUMS: build the release again"
shopt -s nullglob
digest_files=("$dist"/certctl-*.index-digest)
shopt -u nullglob
((${#digest_files[@]} == 1)) ||
  die "expected one certctl-VERSION.index-digest in $dist, found ${#digest_files[@]}"
version=$(basename "${digest_files[0]}" .index-digest)
version=${version#certctl-}
archive=$dist/certctl-$version.oci.tar
chart=$dist/certctl-$version.tgz
for file in "$archive" "$chart"; do
  [[ -f $file ]] || die "$file is missing"
done
digest=$(<"${digest_files[0]}")
[[ $digest =~ ^sha256:[0-9a-f]{64}$ ]] || die "${digest_files[0]} holds no sha256 digest"

# The chart says where it was meant to be published: values.yaml pins the image.
pinned=$(/usr/bin/python3 - "$chart" <<'EOF'
import sys
import tarfile

import yaml

with tarfile.open(sys.argv[1], "r:gz") as tar:
    values = yaml.safe_load(tar.extractfile("certctl/values.yaml"))
    chart = yaml.safe_load(tar.extractfile("certctl/Chart.yaml"))
image = values.get("image") or {}
print(image.get("repository") or "-", image.get("digest") or "-", chart.get("version") or "-")
EOF
) || die "cannot read values.yaml and Chart.yaml in $chart"
read -r pinned_repository pinned_digest chart_version <<<"$pinned"
if [[ $pinned_repository != "$registry/certctl" ]]; then
  die "the release in $dist was built for ${pinned_repository%/certctl} (its chart pins the" \
    "image $pinned_repository), not for $registry; build it for $registry with:" \
    "CERTCTL_REGISTRY=$registry scripts/release.sh $version"
fi
[[ $pinned_digest == "$digest" ]] ||
  die "the chart pins $pinned_digest but the image index is $digest: build the release again"
[[ $chart_version == "$version" ]] ||
  die "the chart's version is $chart_version, the release's $version: build the release again"

# A signed release: its SHA256SUMS signature holds, and the key at hand is its key.
public_key=$dist/cosign.pub
signed=false
if [[ -f $public_key ]]; then
  signed=true
  scripts/install-go-tool.sh cosign
  export PATH="$PWD/.tools/bin:$PATH"
  cosign verify-blob --key "$public_key" --insecure-ignore-tlog=true \
    --signature "$dist/SHA256SUMS.sig" "$dist/SHA256SUMS" >/dev/null 2>&1 ||
    die "$dist/SHA256SUMS.sig does not verify with $public_key: build the release again"
  [[ -n ${CERTCTL_SIGNING_KEY:-} ]] ||
    die "the release in $dist is signed (cosign.pub): set CERTCTL_SIGNING_KEY to its key" \
      "(and COSIGN_PASSWORD to the key's password) to sign what is pushed"
  [[ -n ${COSIGN_PASSWORD+set} ]] ||
    die "CERTCTL_SIGNING_KEY is set but COSIGN_PASSWORD is not (the key's password; empty for none)"
  given=$(cosign public-key --key "$CERTCTL_SIGNING_KEY" 2>/dev/null) ||
    die "CERTCTL_SIGNING_KEY: $CERTCTL_SIGNING_KEY is no cosign private key, or COSIGN_PASSWORD is wrong"
  [[ $given == "$(<"$public_key")" ]] ||
    die "CERTCTL_SIGNING_KEY ($CERTCTL_SIGNING_KEY) is not the key of the release in $dist" \
      "(its cosign.pub)"
elif [[ -n ${CERTCTL_SIGNING_KEY:-} ]]; then
  die "the release in $dist is unsigned (no cosign.pub) but CERTCTL_SIGNING_KEY is set:" \
    "build it with the key"
fi

# 2. Loopback registries have no TLS; every other one is TLS-verified, with the user's login.
host=${registry%%/*}
case $host in
  127.0.0.1 | 127.0.0.1:* | localhost | localhost:* | "[::1]" | "[::1]":*)
    skopeo_tls=(--tls-verify=false)
    skopeo_dest_tls=(--dest-tls-verify=false)
    helm_tls=(--plain-http)
    cosign_tls=(--allow-http-registry) ;;
  *)
    skopeo_tls=()
    skopeo_dest_tls=()
    helm_tls=()
    cosign_tls=() ;;
esac
cosign_hint=
$signed && cosign_hint=", .tools/bin/cosign login $host"
login_hint="(for a registry that needs a login: skopeo login $host, helm registry login $host$cosign_hint)"

# 3. The image index with both images, its digest unchanged.
image=$registry/certctl
log "pushing $image:$version"
skopeo copy --quiet --all --preserve-digests "${skopeo_dest_tls[@]}" \
  "oci-archive:$archive" "docker://$image:$version" >&2 ||
  die "pushing the image to $image failed $login_hint"

# The registry serves the index under the tag and the digest, and every image it lists.
raw_sha256() { skopeo inspect --raw "${skopeo_tls[@]}" "docker://$1" | sha256sum | cut -d' ' -f1; }
served=$(raw_sha256 "$image:$version") || die "cannot read $image:$version back $login_hint"
[[ sha256:$served == "$digest" ]] ||
  die "the registry serves $image:$version as sha256:$served, not $digest"
[[ sha256:$(raw_sha256 "$image@$digest") == "$digest" ]] ||
  die "the registry does not serve $image@$digest"
index_json=$(skopeo inspect --raw "${skopeo_tls[@]}" "docker://$image@$digest")
platforms=()
while read -r child platform; do
  [[ sha256:$(raw_sha256 "$image@$child") == "$child" ]] ||
    die "the registry does not serve the $platform image $image@$child"
  platforms+=("$platform")
done < <(/usr/bin/python3 -c '
import json, sys
for m in json.load(sys.stdin)["manifests"]:
    p = m.get("platform") or {}
    print(m["digest"], "%s/%s" % (p.get("os"), p.get("architecture")))' <<<"$index_json")
((${#platforms[@]} > 0)) || die "the index $digest lists no image"

# 4. The chart, as an OCI artifact; then read back and compared with the release's.
log "pushing the chart to oci://$registry/charts"
helm push "${helm_tls[@]}" "$chart" "oci://$registry/charts" >&2 ||
  die "pushing the chart to oci://$registry/charts failed $login_hint"
pulled=$(mktemp -d)
trap 'rm -rf "$pulled"' EXIT
helm pull "${helm_tls[@]}" "oci://$registry/charts/certctl" --version "$version" \
  --destination "$pulled" >/dev/null 2>&1 ||
  die "cannot pull oci://$registry/charts/certctl $version back $login_hint"
cmp -s "$chart" "$pulled/certctl-$version.tgz" ||
  die "the chart served as oci://$registry/charts/certctl $version differs from $chart"

# 5. A signed release: both signed by digest (no transparency log: the release's public key
# is what verifies them), each once; then verified by tag, as a user does.
verify() {
  cosign verify --key "$public_key" --insecure-ignore-tlog=true "${cosign_tls[@]}" "$1" \
    >/dev/null 2>&1
}
if $signed; then
  chart_digest=sha256:$(raw_sha256 "$registry/charts/certctl:$version") ||
    die "cannot read the chart's manifest back $login_hint"
  for reference in "$image@$digest" "$registry/charts/certctl@$chart_digest"; do
    verify "$reference" && continue
    log "signing $reference"
    cosign sign --yes --key "$CERTCTL_SIGNING_KEY" --tlog-upload=false "${cosign_tls[@]}" \
      "$reference" >/dev/null 2>&1 || die "signing $reference failed $login_hint"
  done
  for reference in "$image:$version" "$registry/charts/certctl:$version"; do
    verify "$reference" || die "the signature of $reference does not verify with $public_key"
  done
fi

echo "image: $image@$digest (tag $version; ${platforms[*]})"
echo "chart: oci://$registry/charts/certctl version $version"
echo "install: helm install RELEASE oci://$registry/charts/certctl --version $version${helm_tls[*]/#/ }"
if $signed; then
  echo "verify: cosign verify --key cosign.pub --insecure-ignore-tlog=true${cosign_tls[*]/#/ } $image:$version"
else
  log "unsigned: the release has no cosign.pub (docs/release.md, Signing)"
fi
