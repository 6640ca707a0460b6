#!/usr/bin/env bash
# Builds the container image localhost/certctl:latest (and :VERSION) from Containerfile:
# first the static executable (scripts/build-static.sh), then the image with podman, in
# podman's default storage. Installs podman and runc when missing, and gives podman the
# settings it needs on a machine like this one (runc, cgroupfs, no default ulimits: a
# container may not raise its rlimits here) in a drop-in of its own. Idempotent.
# Usage: scripts/build-image.sh [--skip-static]   (--skip-static: use build/static/certctl as is)
# Prints the image's name, ID and size. Exit 3: podman cannot run containers on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."

skip_static=false
[[ ${1:-} == --skip-static ]] && skip_static=true

image=localhost/certctl
log() { echo "build-image: $*" >&2; }

if [[ $(id -u) -ne 0 ]]; then
  sudo=sudo
else
  sudo=
fi

missing=()
for package in podman runc ca-certificates; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if ((${#missing[@]} > 0)); then
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

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

$skip_static || scripts/build-static.sh
binary=build/static/certctl
[[ -x $binary ]] || { log "$binary is missing: run scripts/build-static.sh"; exit 1; }

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

context=build/image/context
mkdir -p "$context"
cp "$binary" "$context/certctl"
cp /etc/ssl/certs/ca-certificates.crt "$context/ca-certificates.crt"

read -r version revision < <("$binary" version -o json |
  python3 -c 'import json, sys; v = json.load(sys.stdin); print(v["version"], v["commit"])')

previous=$(podman image inspect --format '{{.Id}}' "$image:latest" 2>/dev/null || true)
log "building $image:latest ($version, $revision)"
# The label names the executable inside, so the end-to-end tests know the image is the one
# built from build/static/certctl and not an older one left in podman's storage. Files and
# image are dated at the commit, so the same executable gives the same image ID.
created=$(git log -1 --format=%ct 2>/dev/null || date +%s)
podman build --quiet --layers=false --network none --timestamp "$created" \
  --build-arg VERSION="$version" --build-arg REVISION="$revision" \
  --label io.certctl.binary.sha256="$(sha256sum "$binary" | cut -d' ' -f1)" \
  -f Containerfile -t "$image:latest" -t "$image:$version" "$context" >/dev/null

id=$(podman image inspect --format '{{.Id}}' "$image:latest")
# The image this one replaces, now without a name, goes (unless a container still uses it).
if [[ -n $previous && $previous != "$id" ]] &&
   [[ -z $(podman image inspect --format '{{join .RepoTags ","}}' "$previous" 2>/dev/null) ]]; then
  podman rmi "$previous" >/dev/null 2>&1 || true
fi
size=$(podman image inspect --format '{{.Size}}' "$image:latest")
echo "image $image:latest ${id:0:12}: $size bytes ($(awk -v s="$size" 'BEGIN { printf "%.1f MB, %.1f MiB", s / 1e6, s / 1048576 }'))"
