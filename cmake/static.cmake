# The static build (preset `static`, scripts/build-static.sh): one static-pie executable.
#
# Included before the find_package() calls, it defines the imported targets they would
# otherwise import from Debian's shared libraries, so the module link lines in
# src/CMakeLists.txt stay the same for both builds:
#   OpenSSL::SSL, OpenSSL::Crypto  Debian's libssl.a and libcrypto.a (FindOpenSSL)
#   spdlog::spdlog                 header-only, with fmt header-only
#   yaml-cpp                       Debian's libyaml-cpp.a
#   CURL::libcurl                  the libcurl.a that scripts/build-static.sh built
# and links every executable with -static-pie, stripped. The same holds for the arm64
# cross-build (preset static-arm64, cmake/toolchain-aarch64-linux-gnu.cmake): there the
# prefix also holds the arm64 libyaml-cpp.a, found before any other.
#
# The linker warns that dlopen, getaddrinfo and gethostbyname "require at run time the shared
# libraries from the glibc version used for linking". dlopen and gethostbyname are libcrypto's
# (loadable engines and providers, BIO's old resolver) and certctl calls neither path.
# getaddrinfo (libcurl, the serving probe, the endpoints' bind) needs no shared library for
# what it is asked here: glibc 2.36 has its `files` and `dns` sources built in, which read
# /etc/hosts and /etc/resolv.conf; only other NSS modules (LDAP, systemd, ...) would be loaded.

if(NOT CMAKE_PREFIX_PATH)
  message(FATAL_ERROR "CERTCTL_STATIC needs CMAKE_PREFIX_PATH set to the prefix "
                      "scripts/build-static.sh fills (build/deps/<arch>/prefix)")
endif()
find_library(CERTCTL_STATIC_CURL NAMES libcurl.a PATHS ${CMAKE_PREFIX_PATH} PATH_SUFFIXES lib
             NO_DEFAULT_PATH REQUIRED)
find_path(CERTCTL_STATIC_CURL_INCLUDE NAMES curl/curl.h PATHS ${CMAKE_PREFIX_PATH}
          PATH_SUFFIXES include NO_DEFAULT_PATH REQUIRED)
find_library(CERTCTL_STATIC_YAML_CPP NAMES libyaml-cpp.a REQUIRED)

set(CMAKE_POSITION_INDEPENDENT_CODE ON)
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)

set(OPENSSL_USE_STATIC_LIBS TRUE)

# -Os rather than Release's -O3: a controller that waits on the network notices no
# difference, and the kernel maps code around every page a process touches, so the smaller
# text is resident memory saved (-O2: 9.3 MB file, 9.7 MiB steady RSS of `run`; -Os: 8.1 MB,
# 8.8 MiB). Only what is used ends up in the file and in memory.
set(CMAKE_CXX_FLAGS_RELEASE "-Os -DNDEBUG")
add_compile_options(-ffunction-sections -fdata-sections)
add_link_options(-static-pie -Wl,--gc-sections -Wl,-O1 -s)

# spdlog and fmt compiled into the translation units that include them (spdlog's targets
# are both defined, else its package file refuses to load; neither links a library).
foreach(target spdlog::spdlog spdlog::spdlog_header_only)
  add_library(${target} INTERFACE IMPORTED GLOBAL)
  set_target_properties(${target} PROPERTIES
    INTERFACE_COMPILE_DEFINITIONS "SPDLOG_HEADER_ONLY;SPDLOG_FMT_EXTERNAL;FMT_HEADER_ONLY"
    INTERFACE_LINK_LIBRARIES Threads::Threads)
endforeach()

add_library(yaml-cpp STATIC IMPORTED GLOBAL)
set_target_properties(yaml-cpp PROPERTIES IMPORTED_LOCATION ${CERTCTL_STATIC_YAML_CPP})

# libcurl's own package file is skipped: its dependencies are named here.
set(CURL_NO_CURL_CMAKE ON)
set(CURL_LIBRARY ${CERTCTL_STATIC_CURL} CACHE FILEPATH "libcurl (static build)")
set(CURL_INCLUDE_DIR ${CERTCTL_STATIC_CURL_INCLUDE} CACHE PATH "libcurl headers (static build)")
find_package(OpenSSL 3.0 REQUIRED)
add_library(CURL::libcurl STATIC IMPORTED GLOBAL)
set_target_properties(CURL::libcurl PROPERTIES
  IMPORTED_LOCATION ${CERTCTL_STATIC_CURL}
  INTERFACE_INCLUDE_DIRECTORIES ${CERTCTL_STATIC_CURL_INCLUDE}
  INTERFACE_COMPILE_DEFINITIONS CURL_STATICLIB
  INTERFACE_LINK_LIBRARIES "OpenSSL::SSL;OpenSSL::Crypto;Threads::Threads")
