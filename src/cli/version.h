#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace certctl::cli {

struct VersionOptions {
  std::string output = "text";
};

CLI::App* AddVersionCommand(CLI::App& app, VersionOptions& options);
int RunVersion(const VersionOptions& options);

}  // namespace certctl::cli
