# Cross-compiling for arm64 (aarch64) Linux with Debian's cross toolchain
# (g++-aarch64-linux-gnu) and its multiarch libraries (libssl-dev:arm64, ...), as preset
# `static-arm64` does (scripts/build-static.sh --arch arm64, scripts/setup-arm64.sh).
#
# There is no separate sysroot: Debian's cross compiler already searches
# /usr/include/aarch64-linux-gnu and /usr/lib/aarch64-linux-gnu, and CMake, told the library
# architecture, looks in the same places, never in the host's /usr/lib/x86_64-linux-gnu.
# Headers that do not depend on the architecture (/usr/include) serve both.

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_AR aarch64-linux-gnu-gcc-ar CACHE FILEPATH "")
set(CMAKE_RANLIB aarch64-linux-gnu-gcc-ranlib CACHE FILEPATH "")
set(CMAKE_STRIP aarch64-linux-gnu-strip CACHE FILEPATH "")

# try_run() checks (libcurl's configuration has some) run their programs under qemu.
find_program(CERTCTL_QEMU_AARCH64 qemu-aarch64-static)
if(CERTCTL_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${CERTCTL_QEMU_AARCH64})
endif()

# pkg-config (FindOpenSSL's hints) answers for arm64, not for the host.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
