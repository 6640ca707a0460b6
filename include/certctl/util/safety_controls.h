#pragma once

#include <cstdlib>
#include <string_view>

namespace certctl {

// The lifecycle soak's control runs (e2e/soak) take one safety out of a build made for them
// (preset `control`, CMake option CERTCTL_SAFETY_CONTROLS) and show that the soak fails
// without it. The safety named by $CERTCTL_REMOVE_SAFETY is then off:
//  - "two-ca-bundle": a CA rotation replaces CA, server certificate and bundle at once;
//  - "names": the certificate's names are not checked against --service/--dns-name/--ip,
//    against what the targets call, nor in the serving check's handshake;
//  - "damping": repairs of a caBundle another writer keeps changing all go at once.
// Every other build (and every release) compiles this to false.
inline bool SafetyRemoved([[maybe_unused]] std::string_view safety) {
#ifdef CERTCTL_SAFETY_CONTROLS
  const char* removed = std::getenv("CERTCTL_REMOVE_SAFETY");  // NOLINT(concurrency-mt-unsafe)
  return removed != nullptr && safety == removed;
#else
  return false;
#endif
}

}  // namespace certctl
