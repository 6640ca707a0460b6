# Sourced by the scripts that install Debian packages (setup.sh, setup-arm64.sh,
# build-static.sh, build-image.sh): one way to find what is missing and to install it.
# Sets $sudo (empty when running as root) for the caller's other privileged steps. The
# caller defines log().
# shellcheck shell=bash

if [[ $(id -u) -ne 0 ]]; then
  sudo=sudo
else
  sudo=
fi
export DEBIAN_FRONTEND=noninteractive

# apt_get ARGS...: apt-get as root, waiting for another apt to finish rather than failing.
apt_get() { $sudo apt-get -o DPkg::Lock::Timeout=900 "$@"; }

# missing_packages PACKAGE...: prints the packages that are not installed, one per line.
missing_packages() {
  local package
  for package in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
      echo "$package"
    fi
  done
}

# install_packages PACKAGE...: installs them (after an index update) and says which. Fails
# when apt-get does.
install_packages() {
  (($# > 0)) || return 0
  log "installing $*"
  apt_get update -qq && apt_get install -y -qq --no-install-recommends "$@" >/dev/null
}

# install_missing PACKAGE...: installs those not installed yet; nothing when all are.
install_missing() {
  local missing
  mapfile -t missing < <(missing_packages "$@")
  install_packages "${missing[@]}"
}
