#include "cli/cluster.h"

#include <spdlog/spdlog.h>

#include "certctl/util/version.h"

#include "cli/flags.h"

namespace certctl::cli {

void AddConnectionFlags(CLI::App& app, ConnectionFlags& flags, std::vector<std::string>* contexts) {
  app.add_option("--kubeconfig", flags.kubeconfig,
                 "Kubeconfig file (default: in-cluster service account, else $KUBECONFIG, else "
                 "~/.kube/config)");
  if (contexts != nullptr) {
    app.add_option("--context", *contexts,
                   "Kubeconfig context (default: current-context); repeatable: one report per "
                   "context")
        ->type_name("NAME");
  } else {
    app.add_option("--context", flags.context, "Kubeconfig context (default: current-context)");
  }
  AddDurationFlag(app, "--request-timeout", flags.request_timeout,
                  "Timeout of each API request (watches excepted)");
  app.add_option("--kube-api-qps", flags.kube_api_qps,
                 "Sustained requests per second to the API server, once the burst is spent")
      ->check(CLI::Range(0.1, 100000.0))
      ->capture_default_str();
  app.add_option("--kube-api-burst", flags.kube_api_burst,
                 "Requests sent at once before --kube-api-qps applies (a first injection into "
                 "hundreds of webhook configurations fits in it)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
}

void AddTargetFlags(CLI::App& app, controller::TargetSelection& selection, TargetRole role) {
  const bool injects = role == TargetRole::kInject;
  app.add_option("--validating-webhook", selection.validating_webhooks,
                 injects ? "ValidatingWebhookConfiguration whose webhooks get the CA bundle "
                           "(repeatable)"
                         : "ValidatingWebhookConfiguration whose webhooks must hold the CA "
                           "bundle and call a name the certificate covers (repeatable)")
      ->type_name("NAME")
      ->check(ObjectNameCheck("ValidatingWebhookConfiguration"));
  app.add_option("--mutating-webhook", selection.mutating_webhooks,
                 injects ? "MutatingWebhookConfiguration whose webhooks get the CA bundle "
                           "(repeatable)"
                         : "MutatingWebhookConfiguration whose webhooks must hold the CA bundle "
                           "and call a name the certificate covers (repeatable)")
      ->type_name("NAME")
      ->check(ObjectNameCheck("MutatingWebhookConfiguration"));
  app.add_option("--crd", selection.crds,
                 injects ? "CustomResourceDefinition whose conversion webhook gets the CA bundle "
                           "(repeatable)"
                         : "CustomResourceDefinition whose conversion webhook must hold the CA "
                           "bundle (repeatable)")
      ->type_name("NAME")
      ->check(ObjectNameCheck("CustomResourceDefinition"));
  app.add_option("--apiservice", selection.api_services,
                 injects ? "APIService that gets the CA bundle (repeatable)"
                         : "APIService that must hold the CA bundle (repeatable)")
      ->type_name("NAME")
      ->check(ObjectNameCheck("APIService"));
  app.add_option("--webhook-selector", selection.webhook_selector,
                 injects ? "Label selector: every validating and mutating webhook "
                           "configuration matching it gets the CA bundle"
                         : "Label selector: every validating and mutating webhook "
                           "configuration matching it is checked")
      ->type_name("SELECTOR")
      // Blank, certctl would write its CA into every webhook configuration, other products' too.
      ->check(LabelSelectorCheck("webhook configuration"));
}

Result<Cluster> ConnectToCluster(const ConnectionFlags& flags, const std::string& namespace_flag,
                                 const Environment& env, const Clock& clock,
                                 kube::ClientOptions client_options) {
  kube::ConfigOptions options;
  options.kubeconfig = flags.kubeconfig;
  options.context = flags.context;
  auto config = kube::LoadClusterConfig(options, env);
  if (!config) {
    return Fail(config.error());
  }
  auto transport = kube::MakeCurlTransport(config->tls);
  if (!transport) {
    return Fail(transport.error().Wrap("connect to " + config->server));
  }
  client_options.request_timeout = flags.request_timeout;
  client_options.qps = flags.kube_api_qps;
  client_options.burst = flags.kube_api_burst;
  if (!client_options.retry.on_retry) {
    client_options.retry.on_retry = [](const std::string& message) { spdlog::info("{}", message); };
  }
  client_options.user_agent = "certctl/" + std::string(Version());
  auto client = kube::MakeRestClient(*config, std::move(*transport), client_options, clock);
  if (!client) {
    return Fail(client.error());
  }
  Cluster cluster;
  cluster.client = std::move(*client);
  cluster.ns = kube::ResolveNamespace(namespace_flag, env, *config);
  if (namespace_flag.empty() && config->namespace_name.empty() &&
      env.Get("POD_NAMESPACE").value_or("").empty()) {
    // A user who forgot -n would otherwise only see objects reported missing.
    spdlog::info(
        "no -n, no $POD_NAMESPACE, and no namespace from a service account or the "
        "kubeconfig context: using namespace \"default\"");
  }
  cluster.description = config->description;
  return cluster;
}

Result<Cluster> ConnectUntil(const ConnectionFlags& flags, const std::string& namespace_flag,
                             const Environment& env, const Clock& clock, TimePoint deadline) {
  kube::ClientOptions client_options;
  client_options.retry.max_retries = -1;
  client_options.retry.deadline = deadline;
  return ConnectToCluster(flags, namespace_flag, env, clock, std::move(client_options));
}

}  // namespace certctl::cli
