#pragma once

#include <string>
#include <string_view>

namespace certctl::cli {

// The executable name kubectl looks for on PATH to run `kubectl certctl ...` (krew installs
// its link under this name too).
inline constexpr std::string_view kPluginExecutable = "kubectl-certctl";

// How the user typed the command, for help, usage lines and messages: "kubectl certctl" when
// argv[0]'s last path component is kubectl-certctl, "certctl" for any other name.
std::string ProgramName(std::string_view argv0);

}  // namespace certctl::cli
