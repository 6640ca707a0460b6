#!/usr/bin/env bash
# Prepares an amd64 Debian machine to build and run certctl for arm64
# (scripts/build-static.sh --arch arm64 calls it):
#   - arm64 as a foreign dpkg architecture, and an apt-get update when it was just added;
#   - Debian's cross compiler (g++-aarch64-linux-gnu) and the arm64 -dev packages the static
#     build links or configures against; they are Multi-Arch: same, so they sit beside the
#     amd64 ones, at the same versions (apt upgrades the amd64 ones to match when needed).
#     libyaml-cpp-dev is not co-installable (no Multi-Arch): build-static.sh takes its arm64
#     archive with `apt-get download` instead of installing it;
#   - qemu-user-static, and binfmt_misc mounted at /proc/sys/fs/binfmt_misc with qemu-aarch64
#     registered with the F flag (the kernel opens the interpreter once, at registration), so
#     an arm64 program runs from anywhere: a chroot, or a podman container of an arm64 image.
# Idempotent: it says what it changed, and nothing when everything is in place already.
# Usage: scripts/setup-arm64.sh
set -euo pipefail

changed=false # whether anything was done: the closing line is said only then
log() {
  changed=true
  echo "setup-arm64: $*" >&2
}
fail() {
  log "error: $*"
  exit 1
}

if [[ $(id -u) -ne 0 ]] && ! command -v sudo >/dev/null; then
  fail "needs root (or sudo) to install packages and register binfmt_misc"
fi
# shellcheck source=scripts/lib/apt.sh
source "$(dirname "$0")/lib/apt.sh"

host=$(dpkg --print-architecture)
[[ $host == amd64 ]] || fail "cross-building for arm64 is set up on amd64 machines only (this one is $host)"

if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  log "adding arm64 as a foreign architecture (dpkg --add-architecture arm64)"
  $sudo dpkg --add-architecture arm64
  apt_get update -qq
fi

packages=(
  g++-aarch64-linux-gnu qemu-user-static
  libssl-dev:arm64 libspdlog-dev:arm64 libfmt-dev:arm64
)
mapfile -t missing < <(missing_packages "${packages[@]}")
if ((${#missing[@]} > 0)); then
  changed=true
  install_packages "${missing[@]}" || fail "apt-get could not install what is listed above"
fi

binfmt=/proc/sys/fs/binfmt_misc
if [[ ! -f $binfmt/register ]]; then
  log "mounting binfmt_misc at $binfmt"
  $sudo mount -t binfmt_misc binfmt_misc "$binfmt" ||
    fail "cannot mount binfmt_misc at $binfmt (a container without the privilege?): arm64 programs cannot run here"
fi

# Debian's qemu-user-static ships the registration line for systemd-binfmt, with the
# flags O (open the binary for the interpreter), P (keep argv[0]) and F.
conf=/usr/lib/binfmt.d/qemu-aarch64.conf
entry=$binfmt/qemu-aarch64
[[ -f $conf ]] || fail "$conf is missing (qemu-user-static installed?)"
line=$(cat "$conf")
[[ ${line##*:} == *F* ]] || line+=F

register() {
  echo "$line" | $sudo tee "$binfmt/register" >/dev/null ||
    fail "cannot register qemu-aarch64 in $binfmt (read-only, or no privilege)"
}

if [[ ! -f $entry ]]; then
  log "registering qemu-aarch64 in binfmt_misc (flags ${line##*:})"
  register
elif ! grep -q '^flags:.*F' "$entry" || ! grep -q '^enabled' "$entry"; then
  log "qemu-aarch64 is registered without the F flag or disabled: registering it again (flags ${line##*:})"
  echo -1 | $sudo tee "$entry" >/dev/null || fail "cannot remove the existing qemu-aarch64 entry"
  register
fi
grep -q '^flags:.*F' "$entry" || fail "qemu-aarch64 is registered, but without the F flag"

# A last check that arm64 programs run here: a static one, so no loader is involved.
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'int main(void) { return 0; }\n' >"$probe/probe.c"
aarch64-linux-gnu-gcc -static -o "$probe/probe" "$probe/probe.c" ||
  fail "aarch64-linux-gnu-gcc cannot link a static program"
"$probe/probe" || fail "an arm64 program does not run through binfmt_misc ($entry)"
$changed || exit 0
log "ready: $(aarch64-linux-gnu-g++ -dumpfullversion) cross compiler, $(qemu-aarch64-static --version | head -n 1), binfmt_misc qemu-aarch64 $(grep ^flags: "$entry")"
