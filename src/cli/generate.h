#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "certctl/util/clock.h"

#include "cli/flags.h"

namespace certctl::cli {

struct GenerateOptions {
  IdentityFlags identity;
  IssuanceFlags issuance;
  std::string out_dir;
  std::string output;  // "", "secret" (YAML manifest) or "secret-json"
  std::string secret_name = kDefaultSecretName;
  bool force = false;
};

CLI::App* AddGenerateCommand(CLI::App& app, GenerateOptions& options);

// Offline: a new CA and server certificate, written as files and/or printed as a Secret.
int RunGenerate(const GenerateOptions& options, const std::string& command, const Clock& clock);

}  // namespace certctl::cli
