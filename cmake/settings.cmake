# One settings target linked into every certctl target: language level, warnings,
# OpenSSL API level and sanitizers live here and nowhere else.
add_library(certctl_settings INTERFACE)
target_compile_features(certctl_settings INTERFACE cxx_std_20)
target_compile_options(certctl_settings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Wunused
  -Woverloaded-virtual -Wformat=2 -Wimplicit-fallthrough
  # GCC 12 reports false -Wrestrict positives inside std::string at -O3 (GCC bug 105329).
  $<$<CXX_COMPILER_ID:GNU>:-Wno-restrict>)
# Only the OpenSSL 3 EVP APIs: deprecated RSA_*/EC_KEY_* calls fail to compile.
target_compile_definitions(certctl_settings INTERFACE
  OPENSSL_API_COMPAT=30000 OPENSSL_NO_DEPRECATED)

if(CERTCTL_WERROR)
  target_compile_options(certctl_settings INTERFACE -Werror)
endif()

if(CERTCTL_SANITIZE)
  target_compile_options(certctl_settings INTERFACE
    -fsanitize=${CERTCTL_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(certctl_settings INTERFACE -fsanitize=${CERTCTL_SANITIZE})
endif()

# Fuzzing: every library gets libFuzzer's coverage instrumentation; only the targets in fuzz/
# link its driver (-fsanitize=fuzzer there).
if(CERTCTL_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "CERTCTL_FUZZ needs clang (libFuzzer); use the fuzz preset")
  endif()
  target_compile_options(certctl_settings INTERFACE -fsanitize=fuzzer-no-link)
endif()

# Version and commit are baked in at configure time for `certctl version`. A release passes
# both (scripts/release.sh: -DCERTCTL_VERSION=0.2.0 -DCERTCTL_COMMIT=<commit>), so what it
# publishes names itself correctly even in a build folder configured at an older commit.
set(CERTCTL_VERSION "" CACHE STRING "Version certctl reports; empty: the project's version")
set(CERTCTL_COMMIT "" CACHE STRING "Commit certctl reports; empty: git's HEAD at configure time")
if(CERTCTL_VERSION STREQUAL "")
  set(CERTCTL_REPORTED_VERSION "${PROJECT_VERSION}")
elseif(CERTCTL_VERSION MATCHES "^[0-9]+\\.[0-9]+\\.[0-9]+(-[0-9A-Za-z.-]+)?$")
  set(CERTCTL_REPORTED_VERSION "${CERTCTL_VERSION}")
else()
  message(FATAL_ERROR "CERTCTL_VERSION '${CERTCTL_VERSION}' is not a version like 1.2.3 "
                      "or 1.2.3-rc.1")
endif()
find_package(Git QUIET)
set(CERTCTL_GIT_COMMIT "unknown")
if(NOT CERTCTL_COMMIT STREQUAL "")
  set(CERTCTL_GIT_COMMIT "${CERTCTL_COMMIT}")
elseif(GIT_FOUND)
  execute_process(
    COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
    OUTPUT_VARIABLE _certctl_commit OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_QUIET RESULT_VARIABLE _certctl_git_rc)
  if(_certctl_git_rc EQUAL 0 AND _certctl_commit)
    set(CERTCTL_GIT_COMMIT "${_certctl_commit}")
    # A commit made after configuring moves HEAD or its branch: configure again then, so that
    # `certctl version` names the tree that was built, not the one configured first.
    execute_process(
      COMMAND ${GIT_EXECUTABLE} rev-parse --absolute-git-dir
      WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
      OUTPUT_VARIABLE _certctl_git_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    execute_process(
      COMMAND ${GIT_EXECUTABLE} symbolic-ref -q HEAD
      WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
      OUTPUT_VARIABLE _certctl_git_ref OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    foreach(_certctl_git_file HEAD packed-refs ${_certctl_git_ref})
      if(EXISTS "${_certctl_git_dir}/${_certctl_git_file}")
        set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
                                               "${_certctl_git_dir}/${_certctl_git_file}")
      endif()
    endforeach()
  endif()
endif()

# Declares a module library: certctl_module(NAME SOURCES ... DEPS ...).
function(certctl_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(certctl_${name} STATIC ${ARG_SOURCES})
  target_include_directories(certctl_${name} PUBLIC ${PROJECT_SOURCE_DIR}/include
                                             PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(certctl_${name} PUBLIC certctl_settings ${ARG_DEPS})
  certctl_batch_sources(certctl_${name})
endfunction()
