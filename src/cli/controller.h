#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "certctl/util/clock.h"
#include "certctl/util/environment.h"

#include "cli/cluster.h"
#include "cli/daemon.h"
#include "cli/flags.h"

namespace certctl::cli {

// The client's rate limit of `controller`: one process serves every webhook of the cluster, so
// its first pass over 1,000 Secrets is about 5,000 requests; at run's 50 a second it would take
// a minute and a half. It binds only such a pass, and a runaway loop: the API server's
// priority and fairness still queues it among the others, and controller-runtime's
// controllers (cert-manager's cainjector among them) set no client-side limit at all and leave
// it to that.
inline constexpr double kControllerQps = 1000;
// Reconciles wait on the API server, not on the CPU: four at once keep two cores busy.
inline constexpr int kControllerWorkers = 4;

struct ControllerOptions {
  ControllerOptions() { connection.kube_api_qps = kControllerQps; }

  ConnectionFlags connection;
  IssuanceFlags issuance;
  std::string cluster_domain = pki::kDefaultClusterDomain;
  std::chrono::seconds renew_before = pki::kDefaultRenewBefore;
  std::chrono::seconds ca_overlap{std::chrono::hours(24)};
  std::vector<std::string> namespaces;  // empty: every namespace
  std::string namespace_selector;       // or the namespaces it selects
  bool cert_manager_annotations = false;
  int workers = kControllerWorkers;
  std::chrono::seconds resync{std::chrono::hours(1)};
  EndpointFlags endpoints;
  LeaseFlags lease;  // lease_name empty: "certctl-controller"
};

CLI::App* AddControllerCommand(CLI::App& app, ControllerOptions& options);

// One controller for every webhook of the cluster, asked for by annotations: runs until
// SIGTERM or SIGINT (exit 0), answering /healthz, /readyz and /metrics. Exit 2 on bad flags or
// an address that cannot be bound; never exits because the API server is unavailable.
int RunClusterController(const ControllerOptions& options, const std::string& command,
                         const Environment& env, const Clock& clock);

}  // namespace certctl::cli
