#pragma once

#include <chrono>
#include <string>

#include <CLI/CLI.hpp>

#include "certctl/controller/check.h"
#include "certctl/leader/elector.h"
#include "certctl/util/clock.h"
#include "certctl/util/environment.h"

#include "cli/cluster.h"
#include "cli/daemon.h"
#include "cli/secret_spec.h"

namespace certctl::cli {

struct RunOptions {
  SecretFlags secret;
  ConnectionFlags connection;
  controller::TargetSelection targets;
  std::string cert_dir;
  EndpointFlags endpoints;
  std::string ready_file;
  std::string serving_addr;               // empty: no serving check
  std::string failure_policy_once_ready;  // "Fail", or empty: off
  std::chrono::seconds resync{std::chrono::hours(1)};
  LeaseFlags lease;  // lease_name empty: "<secret>-certctl"
};

CLI::App* AddRunCommand(CLI::App& app, RunOptions& options);

// The sidecar controller: runs until SIGTERM or SIGINT (exit 0), keeping the Secret, the
// certificate folder and every caBundle right, and answering /healthz, /readyz and /metrics.
// Exit 2 on bad flags or an address that cannot be bound; never exits because the API
// server is unavailable.
int RunController(const RunOptions& options, const std::string& command, const Environment& env,
                  const Clock& clock);

}  // namespace certctl::cli
