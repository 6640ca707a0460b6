#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "certctl/pki/validate.h"
#include "certctl/util/clock.h"
#include "certctl/util/environment.h"

#include "cli/cluster.h"

namespace certctl::cli {

struct AuditOptions {
  ConnectionFlags connection;
  std::vector<std::string> contexts;  // --context, repeatable
  bool all_contexts = false;
  bool handshake = false;
  std::string selector;
  std::chrono::seconds renew_before = pki::kDefaultRenewBefore;
  std::string fail_on = "critical";
  std::string output = "text";
};

CLI::App* AddAuditCommand(CLI::App& app, AuditOptions& options);

// Exit 0 when no finding is at --fail-on or above, 1 when one is, 2 when the audit could not
// run (bad flags, API unreachable, unauthorized or forbidden). With several contexts (each
// audited in parallel): 1 when a finding at --fail-on is in any, else 2 when one could not be
// audited, else 0. Writes nothing to the cluster.
int RunAudit(const AuditOptions& options, const std::string& command, const Environment& env,
             const Clock& clock);

}  // namespace certctl::cli
