#include "cli/version.h"

#include <iostream>

#include <nlohmann/json.hpp>
#include <openssl/crypto.h>

#include "certctl/util/version.h"

#include "cli/exit_codes.h"

namespace certctl::cli {

CLI::App* AddVersionCommand(CLI::App& app, VersionOptions& options) {
  CLI::App* command = app.add_subcommand("version", "Print version, commit and OpenSSL version");
  command->add_option("-o,--output", options.output, "Format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  return command;
}

int RunVersion(const VersionOptions& options) {
  const std::string openssl = OpenSSL_version(OPENSSL_VERSION);
  if (options.output == "json") {
    const nlohmann::ordered_json document = {
        {"version", Version()}, {"commit", GitCommit()}, {"openssl", openssl}};
    std::cout << document.dump() << "\n";
  } else {
    std::cout << "certctl " << Version() << " (commit " << GitCommit() << ", " << openssl << ")\n";
  }
  return kExitOk;
}

}  // namespace certctl::cli
