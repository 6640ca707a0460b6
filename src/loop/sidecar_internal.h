#pragma once

// What the files of the sidecar controller (sidecar.cc and the rooms around it) share.

#include <chrono>

namespace certctl::loop::internal {

// The longest wait between two tries: of a failing pass, of a watch that keeps failing.
inline constexpr std::chrono::milliseconds kMaxBackoff{60000};

}  // namespace certctl::loop::internal
