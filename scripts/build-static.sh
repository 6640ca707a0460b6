#!/usr/bin/env bash
# Builds build/static/certctl: one static-pie executable that needs no shared library, not
# even the C library's loader, so it runs in an image that holds nothing else.
#
# Debian ships static OpenSSL and yaml-cpp, but its libcurl.a wants nghttp2, librtmp, libssh2,
# libpsl, Kerberos and LDAP, none of which Debian ships as static libraries. So libcurl is
# built here, once, from Debian's own source package (the same version as the installed
# libcurl4-openssl-dev, with Debian's patches): HTTP only, TLS by OpenSSL, no other library.
# cpp-httplib comes from its Debian source package too, as the single header upstream ships
# (Debian's -dev package holds a split header and a shared library). spdlog and fmt are used
# header-only. Everything lands in build/deps/; build/deps/prefix is what the `static`
# preset looks in (cmake/static.cmake).
#
# Idempotent: the sources are fetched and libcurl is built only when build/deps/ does not
# already hold the versions wanted; then the `static` preset is configured and built.
# Usage: scripts/build-static.sh [--deps-only]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
deps=$root/build/deps
prefix=$deps/prefix
jobs=2

deps_only=false
[[ ${1:-} == --deps-only ]] && deps_only=true

if [[ $(id -u) -ne 0 ]]; then
  sudo=sudo
else
  sudo=
fi
export DEBIAN_FRONTEND=noninteractive

log() { echo "build-static: $*" >&2; }

# What this build needs, and no more (scripts/setup.sh installs the test tools as well):
# the compilers, the libraries' Debian packages (whose versions name the sources to fetch),
# and dpkg-dev for `apt-get source`.
packages=(
  build-essential cmake ninja-build pkg-config git dpkg-dev
  libssl-dev libcurl4-openssl-dev libyaml-cpp-dev libcpp-httplib-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libexpected-dev
)
missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if ((${#missing[@]} > 0)); then
  log "installing ${missing[*]}"
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

installed_version() { dpkg-query -W -f='${Version}' "$1"; }
curl_version=$(installed_version libcurl4-openssl-dev)
httplib_version=$(installed_version libcpp-httplib-dev)

# Source packages need a deb-src entry. When apt knows none, one is added for the same
# mirrors and suites as the binary entries of debian.sources (or Debian 12's defaults).
ensure_deb_src() {
  if apt-cache showsrc curl 2>/dev/null | grep '^Package: curl' >/dev/null; then
    return
  fi
  local list=/etc/apt/sources.list.d/certctl-deb-src.sources
  log "adding deb-src entries ($list)"
  if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
    sed 's/^Types:.*/Types: deb-src/' /etc/apt/sources.list.d/debian.sources | $sudo tee "$list" >/dev/null
  else
    $sudo tee "$list" >/dev/null <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  fi
  $sudo apt-get update -qq
}

# fetch PACKAGE VERSION: unpacks Debian's source package (patches applied) into
# build/deps/src/PACKAGE-VERSION/ and prints that folder. The installed version is asked
# for; when the mirror no longer has it, the current one is taken.
fetch() {
  local package=$1 version=$2
  local dest=$deps/src/$package-$version
  if [[ ! -f $dest/.fetched ]]; then
    ensure_deb_src
    log "fetching the Debian source of $package $version"
    rm -rf "$dest" "$dest.tmp"
    mkdir -p "$dest.tmp"
    if ! (cd "$dest.tmp" && apt-get source -qq "$package=$version" >/dev/null 2>&1); then
      log "the mirror no longer has $package $version: taking its current version"
      (cd "$dest.tmp" && apt-get source -qq "$package" >/dev/null)
    fi
    local tree
    tree=$(find "$dest.tmp" -mindepth 1 -maxdepth 1 -type d | head -n 1)
    mv "$tree" "$dest"
    rm -rf "$dest.tmp"
    touch "$dest/.fetched"
  fi
  echo "$dest"
}

# libcurl: HTTP(S) only. Every option that would pull in another library is off; the
# threaded resolver uses the C library's getaddrinfo (see README.md, "The image", on name
# resolution in a static executable).
curl_options=(
  -DCMAKE_BUILD_TYPE=Release
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON
  "-DCMAKE_C_FLAGS=-ffunction-sections -fdata-sections -fstack-protector-strong -D_FORTIFY_SOURCE=2"
  -DBUILD_SHARED_LIBS=OFF
  -DBUILD_CURL_EXE=OFF
  -DBUILD_TESTING=OFF
  -DENABLE_MANUAL=OFF
  -DPICKY_COMPILER=OFF
  -DHTTP_ONLY=ON
  -DCURL_USE_OPENSSL=ON
  -DOPENSSL_USE_STATIC_LIBS=ON
  -DCURL_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
  -DCURL_CA_PATH=/etc/ssl/certs
  -DENABLE_THREADED_RESOLVER=ON
  -DENABLE_ARES=OFF
  -DUSE_NGHTTP2=OFF
  -DUSE_LIBIDN2=OFF
  -DCURL_USE_LIBPSL=OFF
  -DCURL_USE_LIBSSH2=OFF
  -DCURL_USE_LIBSSH=OFF
  -DCURL_USE_GSSAPI=OFF
  -DCURL_DISABLE_LDAP=ON
  -DCURL_DISABLE_LDAPS=ON
  -DCURL_ZLIB=OFF
  -DCURL_BROTLI=OFF
  -DCURL_ZSTD=OFF
  -DCURL_DISABLE_ALTSVC=ON
  -DCURL_DISABLE_HSTS=ON
  -DCURL_DISABLE_COOKIES=ON
  -DCURL_DISABLE_NETRC=ON
  -DCURL_DISABLE_DOH=ON
  -DCURL_DISABLE_MIME=ON
  -DCURL_DISABLE_NTLM=ON
  -DCURL_DISABLE_PROGRESS_METER=ON
)

build_curl() {
  local source
  source=$(fetch curl "$curl_version")
  local stamp=$prefix/.curl-stamp
  local want
  want="$curl_version $(printf '%s ' "${curl_options[@]}" | sha256sum | cut -c1-16)"
  if [[ -f $prefix/lib/libcurl.a && -f $stamp && $(cat "$stamp") == "$want" ]]; then
    return
  fi
  log "building libcurl $curl_version into $prefix"
  local started=$SECONDS
  rm -rf "$deps/curl-build" "$prefix/lib/libcurl.a" "$prefix/include/curl"
  cmake -S "$source" -B "$deps/curl-build" -G Ninja -Wno-dev \
    -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib "${curl_options[@]}" >/dev/null
  cmake --build "$deps/curl-build" -j "$jobs" >/dev/null
  cmake --install "$deps/curl-build" >/dev/null
  echo "$want" >"$stamp"
  log "libcurl built in $((SECONDS - started))s"
}

# cpp-httplib: the upstream single header, header-only, without TLS or compression (the
# health and metrics server speaks plain HTTP), described by a .pc file of our own that
# the preset finds before the system's.
install_httplib() {
  local source
  source=$(fetch cpp-httplib "$httplib_version")
  local include=$prefix/include/cpp-httplib
  mkdir -p "$include" "$prefix/lib/pkgconfig"
  if ! cmp -s "$source/httplib.h" "$include/httplib.h"; then
    cp "$source/httplib.h" "$include/httplib.h"
  fi
  local pc=$prefix/lib/pkgconfig/cpp-httplib.pc
  local text
  text="prefix=$prefix
includedir=\${prefix}/include/cpp-httplib

Name: cpp-httplib
Description: cpp-httplib header-only, plain HTTP (certctl static build)
Version: ${httplib_version%%+*}
Libs: -pthread
Cflags: -I\${includedir}"
  if [[ ! -f $pc || $(cat "$pc") != "$text" ]]; then
    echo "$text" >"$pc"
  fi
}

build_curl
install_httplib
$deps_only && exit 0

cmake --preset static >/dev/null
cmake --build --preset static -j "$jobs"
log "built build/static/certctl ($(stat -c %s build/static/certctl) bytes)"
