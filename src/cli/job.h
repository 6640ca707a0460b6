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
#include "cli/secret_spec.h"

namespace certctl::cli {

struct JobOptions {
  std::string phase = "all";  // all, secret, inject
  SecretFlags secret;
  ConnectionFlags connection;
  controller::TargetSelection targets;
  std::chrono::seconds wait_for_targets{120};
  std::string serving_addr;               // empty: readiness without a handshake
  std::string failure_policy_once_ready;  // "Fail", or empty: off
  // Re-issue a leaf even when it drops names that webhooks outside the targets still call.
  bool force_reissue = false;
};

CLI::App* AddJobCommand(CLI::App& app, JobOptions& options);

// The Helm hook: ensure the Secret (phase secret), inject its CA bundle (phase inject), or
// both. Exit 0 on success, 1 with one line naming the object and the reason otherwise.
int RunJob(const JobOptions& options, const std::string& command, const Environment& env,
           const Clock& clock);

}  // namespace certctl::cli
