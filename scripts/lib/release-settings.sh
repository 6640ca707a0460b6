# Where a release of certctl is published: sourced by scripts/release.sh and
# scripts/build-image.sh (scripts/publish.sh reads the registry from the chart a release
# pinned). To publish to a registry of your own, set CERTCTL_REGISTRY in the
# environment (e.g. CERTCTL_REGISTRY=registry.example.com/platform); the image is then
# $CERTCTL_REGISTRY/certctl and the chart oci://$CERTCTL_REGISTRY/charts/certctl.

# The registry and namespace the image and the chart are pushed to, and the chart pins.
CERTCTL_REGISTRY=${CERTCTL_REGISTRY:-ghcr.io/certctl}
# The project's source, named in the image's labels and the SBOM.
CERTCTL_SOURCE_URL=${CERTCTL_SOURCE_URL:-https://github.com/certctl/certctl}
# Where a release's executables are downloaded from (the krew manifest's URIs): the tag's
# release page, v<VERSION> appended.
CERTCTL_DOWNLOAD_URL=${CERTCTL_DOWNLOAD_URL:-$CERTCTL_SOURCE_URL/releases/download}
# The licence certctl is under (SPDX), for the image label and the SBOM.
CERTCTL_LICENSE=Apache-2.0
# The cosign private key that signs a release (a file from `cosign generate-key-pair`; its
# password in COSIGN_PASSWORD). scripts/release.sh writes its public key into the release as
# cosign.pub and signs SHA256SUMS; scripts/publish.sh signs the image index and the chart in
# the registry with it. Empty: an unsigned release.
CERTCTL_SIGNING_KEY=${CERTCTL_SIGNING_KEY:-}
