#!/usr/bin/env bash
# Builds certctl's container image for one architecture from Containerfile: first the static
# executable (scripts/build-static.sh), then its SBOM and licence texts (scripts/lib/sbom.py),
# then the image with podman, in podman's default storage. Installs podman and runc when
# missing, and gives podman the settings it needs on a machine like this one (runc, cgroupfs,
# no default ulimits: a container may not raise its rlimits here) in a drop-in of its own.
# Idempotent.
# Usage: scripts/build-image.sh [--skip-static] [--arch amd64|arm64]
#   --skip-static  use the executable already built (build/static/certctl, or
#                  build/static-arm64/certctl for arm64) as it is
#   --arch         the image's architecture (default: this machine's). arm64 runs the
#                  executable inside the build through qemu-user-static (scripts/setup-arm64.sh)
# Tags: localhost/certctl:VERSION-ARCH; for this machine's architecture also
# localhost/certctl:latest and :VERSION, which the end-to-end tests use. The build folder
# build/image/ARCH/ keeps the context and sbom.spdx.json, which scripts/release.sh publishes.
# Prints the image's name, ID and size. Exit 3: podman cannot run containers on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/release-settings.sh

skip_static=false
host_arch=$(dpkg --print-architecture)
arch=$host_arch
while (($# > 0)); do
  case $1 in
    --skip-static) skip_static=true ;;
    --arch) arch=${2:?--arch needs amd64 or arm64}; shift ;;
    *) echo "build-image: unknown argument '$1' (usage: build-image.sh [--skip-static] [--arch amd64|arm64])" >&2; exit 2 ;;
  esac
  shift
done
case $arch in
  amd64 | arm64) ;;
  *) echo "build-image: --arch must be amd64 or arm64, not '$arch'" >&2; exit 2 ;;
esac

image=localhost/certctl
log() { echo "build-image: $*" >&2; }

source scripts/lib/apt.sh
install_missing podman runc ca-certificates

conf=/etc/containers/containers.conf.d/certctl.conf
wanted='# Written by certctl'"'"'s scripts/build-image.sh: what podman needs to run containers here.
[containers]
default_ulimits = []

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"'
if [[ ! -f $conf || $(cat "$conf") != "$wanted" ]]; then
  log "writing $conf"
  $sudo mkdir -p "$(dirname "$conf")"
  echo "$wanted" | $sudo tee "$conf" >/dev/null
fi

$skip_static || scripts/build-static.sh --arch "$arch"
if [[ $arch == "$host_arch" ]]; then
  static_dir=build/static
  run_binary=()
else
  static_dir=build/static-$arch
  # Another architecture's executable runs under qemu's user-mode emulator.
  qemu=qemu-$([[ $arch == arm64 ]] && echo aarch64 || echo x86_64)-static
  run_binary=("$qemu")
  command -v "$qemu" >/dev/null || { log "$qemu is missing: run scripts/setup-arm64.sh"; exit 1; }
fi
binary=$static_dir/certctl
[[ -x $binary ]] || { log "$binary is missing: run scripts/build-static.sh --arch $arch"; exit 1; }

# Can podman run a container here at all? A one-file image of the executable answers. When
# it cannot, the reason is printed and the exit code is 3: scripts/test.sh goes on without
# the image (its end-to-end tests skip, naming the reason), while any other failure is one.
probe=localhost/certctl-probe:latest
if ! probe_error=$({ tar -C "$(dirname "$binary")" -c certctl |
                     podman import --quiet - "$probe" >/dev/null &&
                     podman run --rm --network none "$probe" /certctl version >/dev/null; } 2>&1 |
                   tr -d '\0'); then
  podman rmi -f "$probe" >/dev/null 2>&1 || true
  log "podman cannot run containers here: $(tail -n 1 <<<"$probe_error")"
  exit 3
fi
podman rmi -f "$probe" >/dev/null

read -r version < <("${run_binary[@]}" "$binary" version -o json |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
# The revision label is the whole commit (the executable reports its first 12 digits).
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
[[ -z $(git status --porcelain --untracked-files=no 2>/dev/null) ]] || revision+=-dirty
# Files and image are dated at the commit, so the same executable gives the same image ID.
created=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

out=build/image/$arch
context=$out/context
rm -rf "$context"
mkdir -p "$context/licenses"
cp "$binary" "$context/certctl"
cp /etc/ssl/certs/ca-certificates.crt "$context/ca-certificates.crt"
SOURCE_DATE_EPOCH=$created /usr/bin/python3 scripts/lib/sbom.py --arch "$arch" \
  --executable "$binary" --build-dir "$static_dir" --version "$version" \
  --out "$out/sbom.spdx.json" --licenses-dir "$context/licenses"

tags=(-t "$image:$version-$arch")
[[ $arch == "$host_arch" ]] && tags+=(-t "$image:latest" -t "$image:$version")
previous=$(podman image inspect --format '{{.Id}}' "$image:$version-$arch" 2>/dev/null || true)
log "building $image:$version-$arch ($revision)"
# The label names the executable inside, so the end-to-end tests know the image is the one
# built from build/static/certctl and not an older one left in podman's storage.
podman build --quiet --layers=false --network none --timestamp "$created" \
  --platform "linux/$arch" \
  --build-arg VERSION="$version" --build-arg REVISION="$revision" \
  --build-arg SOURCE="$CERTCTL_SOURCE_URL" --build-arg LICENSES="$CERTCTL_LICENSE" \
  --build-arg CREATED="$(date -u -d "@$created" +%Y-%m-%dT%H:%M:%SZ)" \
  --label io.certctl.binary.sha256="$(sha256sum "$binary" | cut -d' ' -f1)" \
  -f Containerfile "${tags[@]}" "$context" >/dev/null

id=$(podman image inspect --format '{{.Id}}' "$image:$version-$arch")
# The image this one replaces, now without a name, goes (unless a container still uses it).
if [[ -n $previous && $previous != "$id" ]] &&
   [[ -z $(podman image inspect --format '{{join .RepoTags ","}}' "$previous" 2>/dev/null) ]]; then
  podman rmi "$previous" >/dev/null 2>&1 || true
fi
size=$(podman image inspect --format '{{.Size}}' "$image:$version-$arch")
echo "image $image:$version-$arch ${id:0:12}: $size bytes ($(awk -v s="$size" 'BEGIN { printf "%.1f MB, %.1f MiB", s / 1e6, s / 1048576 }'))"
