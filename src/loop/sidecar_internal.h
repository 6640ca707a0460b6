#pragma once

// What the files of the sidecar controller (sidecar.cc and the rooms around it) share.

#include <chrono>

#include "certctl/util/result.h"

namespace certctl::loop::internal {

// The longest wait between two tries: of a failing pass, of a watch that keeps failing.
inline constexpr std::chrono::milliseconds kMaxBackoff{60000};
// ... when the API server refused the credentials or the request (401, 403): a refusal costs
// it little, and bindings or a token put right should be noticed within seconds.
inline constexpr std::chrono::milliseconds kMaxRefusedBackoff{10000};

inline std::chrono::milliseconds MaxBackoffAfter(const Error& error) {
  const bool refused =
      error.code() == ErrorCode::kPermissionDenied || error.code() == ErrorCode::kUnauthenticated;
  return refused ? kMaxRefusedBackoff : kMaxBackoff;
}

}  // namespace certctl::loop::internal
