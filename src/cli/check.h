#pragma once

#include <chrono>
#include <string>

#include <CLI/CLI.hpp>

#include "certctl/pki/validate.h"
#include "certctl/util/clock.h"

#include "cli/flags.h"

namespace certctl::cli {

struct CheckOptions {
  IdentityFlags identity;
  std::chrono::seconds renew_before = pki::kDefaultRenewBefore;
  std::string cert_dir;
  std::string cert_file;
  std::string key_file;
  std::string ca_file;
  std::string output = "text";
};

CLI::App* AddCheckCommand(CLI::App& app, CheckOptions& options);

// Exit 0 healthy, 1 findings, 2 could not run.
int RunCheck(const CheckOptions& options, const Clock& clock);

}  // namespace certctl::cli
