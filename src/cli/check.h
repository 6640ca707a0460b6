#pragma once

#include <chrono>
#include <string>

#include <CLI/CLI.hpp>

#include "certctl/controller/check.h"
#include "certctl/pki/validate.h"
#include "certctl/util/clock.h"
#include "certctl/util/environment.h"

#include "cli/cluster.h"
#include "cli/flags.h"

namespace certctl::cli {

struct CheckOptions {
  IdentityFlags identity;
  std::chrono::seconds renew_before = pki::kDefaultRenewBefore;
  // The controller's --ca-overlap: how late previous-ca-until may be.
  std::chrono::seconds ca_overlap = controller::kDefaultCaOverlap;
  // Files, or else the Secret.
  std::string cert_dir;
  std::string cert_file;
  std::string key_file;
  std::string ca_file;
  std::string secret_name = kDefaultSecretName;
  ConnectionFlags connection;
  controller::TargetSelection targets;
  std::string output = "text";
};

CLI::App* AddCheckCommand(CLI::App& app, CheckOptions& options);

// Whether a command line that failed to parse asked `check` or `audit` for JSON (`-o json`,
// `-ojson`, `--output json`, `--output=json` after the command): its usage error is then a
// JSON document on stdout too.
bool CheckWantsJson(int argc, char** argv);

// With -o json: the document for an error that stopped the check, {"ok": false, "error"}.
void PrintCheckError(const std::string& message);

// `check` or `audit` could not run: the message on stderr, and with -o json also the error
// document on stdout, so a `| jq` pipeline reads the failure too. Returns exit code 2.
int CouldNotRun(const std::string& command, const std::string& message, const std::string& output);

// A terminal or CI report's client: its answer is the output at the end, so the waits of its
// retries are logged at debug only.
kube::ClientOptions ReportClientOptions();

// Exit 0 healthy, 1 findings, 2 could not run (bad flags, unreadable file, API unreachable,
// unauthorized or forbidden).
int RunCheck(const CheckOptions& options, const std::string& command, const Environment& env,
             const Clock& clock);

}  // namespace certctl::cli
