#pragma once

#include <functional>
#include <string>

namespace certctl::loop {

enum class LogLevel { kDebug, kInfo, kWarning };
using LogSink = std::function<void(LogLevel level, const std::string& message)>;

}  // namespace certctl::loop
