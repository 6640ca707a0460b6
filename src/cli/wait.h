#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "certctl/util/clock.h"

#include "cli/flags.h"

namespace certctl::cli {

struct WaitOptions {
  std::string cert_dir;
  IdentityFlags identity;
  std::chrono::seconds timeout{120};
  std::chrono::seconds interval{1};
  std::vector<std::string> command;  // after "--": exec'd once the pair is valid
};

CLI::App* AddWaitCommand(CLI::App& app, WaitOptions& options);

// Returns 0 once the folder holds a valid pair (or execs the command, never returning),
// 1 on timeout with the last reason.
int RunWait(const WaitOptions& options, const std::string& command, const Clock& clock);

}  // namespace certctl::cli
