#!/usr/bin/env bash
# Builds one static-pie executable that needs no shared library, not even the C library's
# loader, so it runs in an image that holds nothing else:
#   build/static/certctl        for this machine's architecture (preset `static`)
#   build/static-arm64/certctl  for arm64, cross-built on amd64 (preset `static-arm64`, with
#                               cmake/toolchain-aarch64-linux-gnu.cmake; scripts/setup-arm64.sh
#                               installs the cross compiler, the arm64 libraries and qemu)
# and runs it once (`certctl version`; arm64 under qemu-aarch64-static): a failure fails here.
# Next to it, deps.txt names what was built from a Debian source package, one
# "<source package> <Debian version>" a line.
#
# Debian ships static OpenSSL and yaml-cpp, but its libcurl.a wants nghttp2, librtmp, libssh2,
# libpsl, Kerberos and LDAP, none of which Debian ships as static libraries. So libcurl is
# built here from Debian's own source package (the same version as the installed
# libcurl4-openssl-dev, with Debian's patches): HTTP only, TLS by OpenSSL, no other library.
# spdlog and fmt are used header-only; cpp-httplib is not needed (only the tests use it, and
# the static presets build none). For arm64, libyaml-cpp.a comes from Debian's
# libyaml-cpp-dev:arm64 archive, unpacked rather than installed: that package cannot be
# installed beside the amd64 one.
#
# The cache. What is built or downloaded lives outside the clone, so another clone on this
# machine reuses it, under ${CERTCTL_CACHE_DIR:-$HOME/.cache/certctl}/deps/:
#   src/PACKAGE-VERSION/               Debian source packages, unpacked (patches applied)
#   ARCH/curl-VERSION-HASH/            libcurl's installed prefix; HASH covers its options, the
#                                      compiler, the OpenSSL headers and the toolchain file, so
#                                      changing any of them (or the version, or ARCH) builds anew
#   arm64/yaml-cpp-VERSION/            libyaml-cpp-dev:arm64, unpacked
# Each entry is made in a temporary folder beside it and renamed into place once complete: an
# interrupted build leaves no half entry (its leftovers are removed by the next run), and
# two builds racing for one entry both end up using whichever was renamed first.
#
# The prefix a preset looks in (CMAKE_PREFIX_PATH, cmake/static.cmake) is
# build/deps/ARCH/prefix: a small folder of the clone holding symbolic links into the cache
# (include/curl, lib/libcurl.a, ...). Links rather than copies, so what a build used is visible with ls -l and nothing is stored twice; the folder
# is remade on every run, so it follows the cache, and deleting build/deps costs nothing.
# Preset `static` reads build/deps/prefix, a link to this machine's architecture's folder.
# When the links change (another libcurl), the preset's build folder is emptied first:
# ninja would not relink against an older file that a link now points to.
#
# Usage: scripts/build-static.sh [--arch amd64|arm64] [--deps-only]
#   --arch       the architecture to build for (default: this machine's)
#   --deps-only  prepare the prefix only
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=2

log() { echo "build-static: $*" >&2; }
fail() {
  log "error: $*"
  exit 1
}
usage() {
  sed -n 's/^# Usage: //p; s/^#   --/  --/p' "$0" >&2
  exit 2
}

host=$(dpkg --print-architecture)
arch=$host
deps_only=false
while (($# > 0)); do
  case $1 in
    --arch) (($# > 1)) || usage; arch=$2; shift 2 ;;
    --arch=*) arch=${1#--arch=}; shift ;;
    --deps-only) deps_only=true; shift ;;
    -h | --help) usage ;;
    *) log "unknown argument: $1"; usage ;;
  esac
done

# The native build keeps its preset and folder; arm64 is cross-built from amd64 only.
if [[ $arch == "$host" ]]; then
  preset=static
  out=build/static
  triplet=$(gcc -dumpmachine)
  cc=gcc
  toolchain=
  run=()
elif [[ $arch == arm64 && $host == amd64 ]]; then
  preset=static-arm64
  out=build/static-arm64
  triplet=aarch64-linux-gnu
  cc=aarch64-linux-gnu-gcc
  toolchain=$root/cmake/toolchain-aarch64-linux-gnu.cmake
  run=(qemu-aarch64-static)
else
  fail "cannot build for '$arch' on $host (supported: $host, and arm64 on amd64)"
fi

cache=${CERTCTL_CACHE_DIR:-$HOME/.cache/certctl}/deps
deps=$root/build/deps
prefix=$deps/$arch/prefix

source "$root/scripts/lib/apt.sh"

# What this build needs, and no more (scripts/setup.sh installs the test tools as well):
# the compilers, the libraries' Debian packages (whose versions name the sources to fetch;
# their headers serve every architecture), and dpkg-dev for `apt-get source`.
packages=(
  build-essential cmake ninja-build pkg-config git dpkg-dev
  libssl-dev libcurl4-openssl-dev libyaml-cpp-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libexpected-dev
)
install_missing "${packages[@]}"
[[ $arch == "$host" ]] || scripts/setup-arm64.sh

installed_version() { dpkg-query -W -f='${Version}' "$1"; }
curl_wanted=$(installed_version libcurl4-openssl-dev)

# Leftovers of runs that were killed: temporary folders whose process is gone.
clean_leftovers() {
  local dir=$1 tmp pid
  [[ -d $dir ]] || return 0
  for tmp in "$dir"/.*.tmp.*; do
    [[ -e $tmp ]] || continue
    pid=${tmp##*.}
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -rf "$tmp"
    fi
  done
}

# publish TMP FINAL: renames the finished TMP to FINAL; when another run was first, its
# entry stays and TMP goes.
publish() {
  local tmp=$1 final=$2
  if ! mv -T "$tmp" "$final" 2>/dev/null; then
    [[ -d $final ]] || fail "cannot rename $tmp to $final"
    rm -rf "$tmp"
  fi
}

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
  apt_get update -qq
}

# fetch PACKAGE VERSION: unpacks Debian's source package (patches applied) into the cache,
# sets `source` to its folder and `source_version` to the version it holds. The installed
# version is asked for; when the mirror no longer has it, the current one is taken (and
# remembered in .version, which is what deps.txt and the libcurl entry are named after).
fetch() {
  local package=$1 version=$2
  local dest=$cache/src/$package-$version
  if [[ ! -f $dest/.version ]]; then
    ensure_deb_src
    mkdir -p "$cache/src"
    clean_leftovers "$cache/src"
    log "fetching the Debian source of $package $version into $cache/src"
    local tmp=$cache/src/.$package-$version.tmp.$$
    rm -rf "$tmp"
    mkdir -p "$tmp/download"
    if ! (cd "$tmp/download" && apt-get source -qq "$package=$version" >/dev/null 2>&1); then
      log "the mirror no longer has $package $version: taking its current version"
      (cd "$tmp/download" && apt-get source -qq "$package" >/dev/null)
    fi
    local tree
    tree=$(find "$tmp/download" -mindepth 1 -maxdepth 1 -type d | head -n 1)
    [[ -n $tree ]] || fail "apt-get source $package unpacked nothing"
    mv "$tree" "$tmp/tree"
    rm -rf "$tmp/download"
    dpkg-parsechangelog -l "$tmp/tree/debian/changelog" -S Version >"$tmp/tree/.version"
    publish "$tmp/tree" "$dest"
    rm -rf "$tmp"
  fi
  source=$dest
  source_version=$(cat "$dest/.version")
}

# libcurl: HTTP(S) only. Every option that would pull in another library is off; the
# threaded resolver uses the C library's getaddrinfo (see docs/development.md, "The image", on name
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

# Sets curl_dir to the cached libcurl for this architecture, building it when missing.
build_curl() {
  fetch curl "$curl_wanted"
  curl_version=$source_version
  # Everything the result depends on besides the source: the options, the compiler, the
  # OpenSSL headers it is configured against, and how the compiler is driven.
  local key
  key="arch $arch
options $(printf '%s ' "${curl_options[@]}")
compiler $cc $($cc -dumpmachine) $($cc --version | head -n 1)
openssl $(installed_version "libssl-dev:$arch")"
  if [[ -n $toolchain ]]; then
    key+="
toolchain $(sha256sum <"$toolchain" | cut -c1-64)"
  fi
  local hash
  hash=$(sha256sum <<<"$key" | cut -c1-16)
  curl_dir=$cache/$arch/curl-$curl_version-$hash
  [[ -f $curl_dir/lib/libcurl.a ]] && return

  mkdir -p "$cache/$arch"
  clean_leftovers "$cache/$arch"
  log "building libcurl $curl_version for $arch into $curl_dir"
  local started=$SECONDS
  local tmp=$cache/$arch/.curl-$curl_version-$hash.tmp.$$
  rm -rf "$tmp"
  local compiler=(-DCMAKE_C_COMPILER="$cc")
  [[ -n $toolchain ]] && compiler=(-DCMAKE_TOOLCHAIN_FILE="$toolchain")
  cmake -S "$source" -B "$tmp/build" -G Ninja -Wno-dev "${compiler[@]}" \
    -DCMAKE_INSTALL_PREFIX="$curl_dir" -DCMAKE_INSTALL_LIBDIR=lib "${curl_options[@]}" >/dev/null
  cmake --build "$tmp/build" -j "$jobs" >/dev/null
  # Installed under DESTDIR at its final path (so its .pc and curl-config name that path),
  # then renamed there whole.
  DESTDIR=$tmp/root cmake --install "$tmp/build" >/dev/null
  echo "$key" >"$tmp/root$curl_dir/certctl-cache-key.txt"
  publish "$tmp/root$curl_dir" "$curl_dir"
  rm -rf "$tmp"
  log "libcurl built in $((SECONDS - started))s"
}

# arm64 only: sets yaml_dir to libyaml-cpp-dev:arm64, unpacked, at the version of the
# installed amd64 package (whose headers the build reads).
unpack_yaml_cpp() {
  local version
  version=$(installed_version libyaml-cpp-dev)
  yaml_dir=$cache/$arch/yaml-cpp-$version
  [[ -f $yaml_dir/usr/lib/$triplet/libyaml-cpp.a ]] && return
  mkdir -p "$cache/$arch"
  clean_leftovers "$cache/$arch"
  log "unpacking libyaml-cpp-dev:$arch $version into $yaml_dir"
  local tmp=$cache/$arch/.yaml-cpp-$version.tmp.$$
  rm -rf "$tmp"
  mkdir -p "$tmp/download"
  # apt's sandbox user may not write the cache; the archive is checked against apt's lists.
  (cd "$tmp/download" && apt-get download -qq -o APT::Sandbox::User=root \
    "libyaml-cpp-dev:$arch=$version" >/dev/null) ||
    fail "the mirror has no libyaml-cpp-dev:$arch $version (upgrade libyaml-cpp-dev to its current version)"
  dpkg-deb -x "$tmp"/download/*.deb "$tmp/tree"
  [[ -f $tmp/tree/usr/lib/$triplet/libyaml-cpp.a ]] || fail "libyaml-cpp-dev:$arch holds no libyaml-cpp.a"
  publish "$tmp/tree" "$yaml_dir"
  rm -rf "$tmp"
}

# Remakes build/deps/ARCH/prefix: links into the cache.
link_prefix() {
  local tmp=$prefix.tmp.$$
  rm -rf "$tmp"
  mkdir -p "$tmp/include" "$tmp/lib"
  ln -s "$curl_dir/include/curl" "$tmp/include/curl"
  ln -s "$curl_dir/lib/libcurl.a" "$tmp/lib/libcurl.a"
  if [[ -n ${yaml_dir:-} ]]; then
    ln -s "$yaml_dir/usr/lib/$triplet/libyaml-cpp.a" "$tmp/lib/libyaml-cpp.a"
    mkdir -p "$tmp/lib/cmake"
    ln -s "$yaml_dir/usr/lib/$triplet/cmake/yaml-cpp" "$tmp/lib/cmake/yaml-cpp"
  fi
  rm -rf "$prefix"
  mv "$tmp" "$prefix"
  # What the links point to, for the check below.
  manifest=$(find "$prefix" -type l -printf '%P -> %l\n' | sort)
  if [[ $arch == "$host" ]]; then
    # The `static` preset's prefix. A folder of an older layout is replaced by the link.
    [[ -L $deps/prefix || ! -e $deps/prefix ]] || rm -rf "$deps/prefix"
    ln -sfn "$arch/prefix" "$deps/prefix"
  fi
}

# The sources and the libcurl build that build/deps/ itself held before the cache existed.
rm -rf "$deps/src" "$deps/curl-build"

build_curl
yaml_dir=
[[ $arch == "$host" ]] || unpack_yaml_cpp
link_prefix
$deps_only && exit 0

stamp=$out/.deps-links
if [[ -f $stamp && $(cat "$stamp") != "$manifest" ]]; then
  log "the libraries changed: building $out anew"
  rm -rf "$out"
fi
started=$SECONDS
# What `certctl version` reports: a release sets both (scripts/release.sh); otherwise the
# project's version and git's HEAD, also in a build folder a release configured before.
cmake --preset "$preset" -DCERTCTL_VERSION="${CERTCTL_VERSION:-}" \
  -DCERTCTL_COMMIT="${CERTCTL_COMMIT:-}" >/dev/null
cmake --build --preset "$preset" -j "$jobs"
echo "$manifest" >"$stamp"
printf 'curl %s\n' "$curl_version" >"$out/deps.txt"

binary=$out/certctl
version=$("${run[@]}" "$binary" version) || fail "$binary does not run (${run[*]:-directly}): $version"
log "built $binary for $arch ($(stat -c %s "$binary") bytes) in $((SECONDS - started))s: $(head -n 1 <<<"$version")"
