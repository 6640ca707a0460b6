# Sourced by scripts/build.sh and scripts/test.sh: compiles through ccache, with one cache
# kept outside the clone (CERTCTL_CACHE_DIR, default ~/.cache/certctl) so that a fresh clone
# at any path reuses what an earlier clone compiled. CMake reads the *_COMPILER_LAUNCHER
# and CFLAGS/CXXFLAGS variables when it first configures a build folder; so every preset
# (ci, asan, fuzz, static) compiles through ccache without a change to CMakePresets.json.
# Nothing happens when ccache is not installed (scripts/setup.sh installs it) or when
# CERTCTL_CCACHE=0.
# shellcheck shell=bash

if [[ ${CERTCTL_CCACHE:-1} != 0 ]] && command -v ccache >/dev/null; then
  export CERTCTL_CACHE_DIR=${CERTCTL_CACHE_DIR:-$HOME/.cache/certctl}
  export CCACHE_DIR=${CCACHE_DIR:-$CERTCTL_CACHE_DIR/ccache}
  # Paths under the clone are hashed relative to it, and the working directory is left out
  # of the hash; -ffile-prefix-map writes "." instead of the clone's path into the debug
  # information and __FILE__, so an object from another clone is the same object.
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
  export CCACHE_NOHASHDIR=1
  export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
  # Compiler checks by content, not mtime: a reinstalled compiler package of the same
  # version still hits.
  export CCACHE_COMPILERCHECK=${CCACHE_COMPILERCHECK:-content}
  export CMAKE_C_COMPILER_LAUNCHER=ccache
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache
  case " ${CXXFLAGS:-} " in
    *" -ffile-prefix-map=$PWD=. "*) ;;
    *) export CXXFLAGS="${CXXFLAGS:+$CXXFLAGS }-ffile-prefix-map=$PWD=." ;;
  esac
  case " ${CFLAGS:-} " in
    *" -ffile-prefix-map=$PWD=. "*) ;;
    *) export CFLAGS="${CFLAGS:+$CFLAGS }-ffile-prefix-map=$PWD=." ;;
  esac
  mkdir -p "$CCACHE_DIR"
fi
