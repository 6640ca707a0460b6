#!/usr/bin/env bash
# Builds the example webhook (examples/webhook) into the image localhost/example-webhook:dev:
# a static Go executable, built outside the clone, in an otherwise empty image. Does nothing
# when the image holds a build of the same sources with the same Go. Prints the image name.
# Env: CERTCTL_CACHE_DIR  where the executable is kept (default ~/.cache/certctl)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
sources=$repo/examples/webhook
image=localhost/example-webhook:dev
cache=${CERTCTL_CACHE_DIR:-$HOME/.cache/certctl}/example-webhook

die() {
  echo "build-example-webhook: $*" >&2
  exit 1
}

command -v go >/dev/null || die "Go is not installed; install Go 1.26 or later (scripts/setup.sh says how)"
command -v podman >/dev/null || die "podman is not installed (scripts/setup.sh installs it)"
key=$(cat "$sources"/go.mod "$sources"/*.go "$sources"/Containerfile <(go env GOVERSION) |
  sha256sum | cut -c1-12)
if [[ $(podman image inspect --format '{{index .Labels "io.certctl.source"}}' "$image" \
  2>/dev/null) == "$key" ]]; then
  echo "$image"
  exit 0
fi
context=$cache/$key
mkdir -p "$context"
(cd "$sources" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$context/webhook" .) ||
  die "go build of examples/webhook failed"
cp "$sources/Containerfile" "$context/Containerfile"
podman build --quiet --network none --label "io.certctl.source=$key" -t "$image" \
  -f "$context/Containerfile" "$context" >/dev/null || die "podman build failed"
# Older builds' folders go; this one stays for the next comparison.
find "$cache" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -exec rm -rf {} +
echo "$image"
