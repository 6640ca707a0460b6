#!/usr/bin/env bash
# Installs every build and test dependency from Debian's packages. Idempotent: prints
# nothing and touches nothing when all of it is already there.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libssl-dev openssl libcurl4-openssl-dev libyaml-cpp-dev libcpp-httplib-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libexpected-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-format clang-tidy clang-14 libclang-rt-14-dev
  hyperfine strace
  python3 python3-pytest python3-kubernetes python3-yaml python3-prometheus-client
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

# kubectl is not a Debian package: it comes with the machine image.
check_kubectl() {
  if ! command -v kubectl >/dev/null; then
    echo "setup: kubectl (1.32) is not installed; the demo and the end-to-end tests need it" >&2
    exit 1
  fi
}

if ((${#missing[@]} == 0)); then
  check_kubectl
  "$(dirname "$0")/install-helm.sh"
  exit 0
fi

echo "setup: installing ${missing[*]}" >&2
if [[ $(id -u) -ne 0 ]]; then
  sudo=sudo
else
  sudo=
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done" >&2
check_kubectl
"$(dirname "$0")/install-helm.sh"
