#pragma once

#include <chrono>
#include <string>

#include <CLI/CLI.hpp>

#include "certctl/controller/check.h"
#include "certctl/util/clock.h"
#include "certctl/util/environment.h"

#include "cli/cluster.h"
#include "cli/secret_spec.h"

namespace certctl::cli {

struct RotateOptions {
  bool ca = false;    // a new CA (in steps); otherwise a new server certificate
  bool wait = false;  // return once the rotation is done, printing each step
  std::chrono::seconds controller_timeout{5};
  std::chrono::seconds timeout{std::chrono::minutes(5)};
  std::string lease_name;  // the controllers' Lease (run's --lease-name); empty: SECRET-certctl
  SecretFlags secret;
  ConnectionFlags connection;
  controller::TargetSelection targets;
};

CLI::App* AddRotateCommand(CLI::App& app, RotateOptions& options);

// Asks the controller to rotate (an annotation on the Secret); when none takes the request
// within --controller-timeout (longer while the controllers' Lease names a leader that may
// have died), carries the rotation out itself with the same steps.
// Exit 0 when the request was taken (with --wait: carried out) or carried out, 1 otherwise.
int RunRotate(const RotateOptions& options, const std::string& command, const Environment& env,
              const Clock& clock);

}  // namespace certctl::cli
