#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "certctl/kube/transport.h"
#include "certctl/util/environment.h"
#include "certctl/util/result.h"

namespace certctl::kube {

// Default folder of the in-cluster service account; CERTCTL_SERVICEACCOUNT_DIR overrides it.
inline constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";

// A kubeconfig `exec` credential plugin (client.authentication.k8s.io/v1 or v1beta1).
struct ExecCredential {
  std::string command;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string api_version;
};

// Everything needed to reach and authenticate to one API server.
struct ClusterConfig {
  std::string server;  // https://host:port, no trailing slash
  TlsOptions tls;
  std::string token;       // static bearer token
  std::string token_file;  // bearer token re-read from this file (it rotates)
  std::optional<ExecCredential> exec;
  std::string namespace_name;  // from the context or the service account; empty if none
  std::string description;     // "in-cluster" or "kubeconfig /path, context x": for messages
};

struct ConfigOptions {
  std::string kubeconfig;  // --kubeconfig; empty: $KUBECONFIG, then ~/.kube/config
  std::string context;     // --context; empty: current-context
};

// In-cluster when KUBERNETES_SERVICE_HOST is set (unless a kubeconfig is given explicitly),
// else the kubeconfig: $KUBECONFIG is a ':'-list merged like kubectl does (first file to
// set a map entry wins), relative paths resolve against the file that names them.
// Errors name the file and the field at fault.
Result<ClusterConfig> LoadClusterConfig(const ConfigOptions& options, const Environment& env);

// The names of the contexts in the kubeconfig `options` lead to (its `context` is not used),
// sorted; for `--all-contexts`. Errors as LoadClusterConfig's.
Result<std::vector<std::string>> KubeconfigContexts(const ConfigOptions& options,
                                                    const Environment& env);

// -n, else $POD_NAMESPACE, else the service account's or context's namespace, else "default".
std::string ResolveNamespace(const std::string& flag, const Environment& env,
                             const ClusterConfig& config);

}  // namespace certctl::kube
