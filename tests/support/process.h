#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace certctl::testing {

struct ProcessResult {
  int exit_code = -1;  // 128 + signal when killed by a signal
  std::string out;
  std::string err;
};

struct ProcessOptions {
  std::optional<std::string> stdin_data;
  std::map<std::string, std::string> extra_env;  // added to (or replacing in) this environment
  std::filesystem::path working_dir;             // empty: inherit
  std::chrono::milliseconds timeout{60000};      // killed with SIGKILL past this
};

// Runs argv[0] (searched in PATH) and collects everything it writes.
ProcessResult RunProcess(const std::vector<std::string>& argv, const ProcessOptions& options = {});

// Runs `openssl ARGS...`; fails the current test when it does not exit 0.
std::string Openssl(const std::vector<std::string>& args,
                    const std::optional<std::string>& stdin_data = std::nullopt);

}  // namespace certctl::testing
