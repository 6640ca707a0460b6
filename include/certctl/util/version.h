#pragma once

#include <string_view>

namespace certctl {

std::string_view Version();    // "0.2.0"
std::string_view GitCommit();  // short commit hash, or "unknown" outside a checkout

}  // namespace certctl
