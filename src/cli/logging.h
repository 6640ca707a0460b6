#pragma once

#include <string>
#include <vector>

#include "certctl/util/result.h"

namespace certctl::cli {

struct LoggingFlags {
  std::string level = "info";   // trace, debug, info, warn, error, off
  std::string format = "text";  // text or json
};

std::vector<std::string> LogLevelNames();

// Sends spdlog's default logger to stderr in the chosen level and format. JSON lines carry
// "time", "level" and "msg", so log collectors can parse them without a pattern.
Status SetupLogging(const LoggingFlags& flags);

}  // namespace certctl::cli
