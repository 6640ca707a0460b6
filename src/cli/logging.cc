#include "cli/logging.h"

#include <memory>

#include <nlohmann/json.hpp>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "certctl/util/duration.h"

namespace certctl::cli {
namespace {

// One JSON object per line; nlohmann does the escaping so any message stays valid JSON.
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto millis =
        std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()) % 1000;
    std::string time = FormatRfc3339(std::chrono::time_point_cast<std::chrono::seconds>(msg.time));
    char fraction[8];
    std::snprintf(fraction, sizeof(fraction), ".%03d", static_cast<int>(millis.count()));
    time.insert(time.size() - 1, fraction);
    const nlohmann::json line = {
        {"time", time},
        {"level", std::string(spdlog::level::to_string_view(msg.level).data(),
                              spdlog::level::to_string_view(msg.level).size())},
        {"msg", std::string(msg.payload.data(), msg.payload.size())},
    };
    const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(text.data(), text.data() + text.size());
    dest.push_back('\n');
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

}  // namespace

std::vector<std::string> LogLevelNames() {
  return {"trace", "debug", "info", "warn", "error", "off"};
}

Status SetupLogging(const LoggingFlags& flags) {
  const spdlog::level::level_enum level = spdlog::level::from_str(flags.level);
  if (level == spdlog::level::off && flags.level != "off") {
    return Fail(ErrorCode::kInvalidArgument, "unknown log level \"" + flags.level + "\"");
  }
  auto logger = std::make_shared<spdlog::logger>("certctl",
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  if (flags.format == "json") {
    logger->set_formatter(std::make_unique<JsonFormatter>());
  } else if (flags.format == "text") {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %^%-5l%$ %v", spdlog::pattern_time_type::utc);
  } else {
    return Fail(ErrorCode::kInvalidArgument, "unknown log format \"" + flags.format + "\"");
  }
  logger->set_level(level);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(std::move(logger));
  return {};
}

}  // namespace certctl::cli
