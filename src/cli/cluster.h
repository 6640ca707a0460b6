#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "certctl/controller/check.h"
#include "certctl/kube/client.h"
#include "certctl/kube/config.h"
#include "certctl/util/clock.h"
#include "certctl/util/environment.h"
#include "certctl/util/result.h"

namespace certctl::cli {

// --kubeconfig, --context, --request-timeout: the same in every command that talks to the
// cluster.
struct ConnectionFlags {
  std::string kubeconfig;
  std::string context;
  std::chrono::seconds request_timeout{30};
  // Client-side rate limit (token bucket), as the kubelet's --kube-api-qps/--kube-api-burst.
  double kube_api_qps = 50;
  int kube_api_burst = 1000;
};
// With `contexts`, --context is repeatable and fills it instead of `flags.context`.
void AddConnectionFlags(CLI::App& app, ConnectionFlags& flags,
                        std::vector<std::string>* contexts = nullptr);

// Whether a command writes the CA bundle into its targets or only checks them: the help of
// each target flag says which.
enum class TargetRole { kInject, kCheck };

// --validating-webhook, --mutating-webhook, --crd, --apiservice (repeatable), --webhook-selector.
void AddTargetFlags(CLI::App& app, controller::TargetSelection& selection, TargetRole role);

struct Cluster {
  std::unique_ptr<kube::Client> client;
  std::string ns;           // -n, $POD_NAMESPACE, the service account's or context's, "default"
  std::string description;  // where the configuration came from, for messages
};

// Loads the configuration (in-cluster or kubeconfig) and builds the REST client with
// `client_options` (its request timeout and user agent come from the flags and the version;
// transient API failures are ridden out as its retry options say, each wait logged at info
// unless they name another sink). Fails with a message naming the file or variable at fault.
Result<Cluster> ConnectToCluster(const ConnectionFlags& flags, const std::string& namespace_flag,
                                 const Environment& env, const Clock& clock,
                                 kube::ClientOptions client_options = {});

// The same for a one-shot command with one deadline for all its work: requests safe to repeat
// are retried until then, and never after.
Result<Cluster> ConnectUntil(const ConnectionFlags& flags, const std::string& namespace_flag,
                             const Environment& env, const Clock& clock, TimePoint deadline);

}  // namespace certctl::cli
