#!/usr/bin/env bash
# Installs every build and test dependency from Debian's packages. Idempotent: prints
# nothing and touches nothing when all of it is already there.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libssl-dev openssl libcurl4-openssl-dev libyaml-cpp-dev libcpp-httplib-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libexpected-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-format clang-tidy
  hyperfine
  python3 python3-pytest python3-kubernetes python3-yaml
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if ((${#missing[@]} == 0)); then
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
