#include "cli/controller.h"

#include <iostream>
#include <memory>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <spdlog/spdlog.h>

#include "certctl/endpoints/server.h"
#include "certctl/fleet/controller.h"
#include "certctl/kube/names.h"
#include "certctl/metrics/registry.h"
#include "certctl/util/duration.h"
#include "certctl/util/text.h"

#include "cli/exit_codes.h"
#include "cli/secret_spec.h"

namespace certctl::cli {
namespace {

constexpr char kDefaultLeaseName[] = "certctl-controller";

endpoints::Routes HealthRoutes(const fleet::Controller& controller) {
  endpoints::Routes routes;
  routes["/healthz"] = [&controller](const endpoints::Query&) {
    return controller.Alive() ? endpoints::Response{200, "ok\n"}
                              : endpoints::Response{500, "the controller's loop is stuck\n"};
  };
  routes["/readyz"] = [&controller](const endpoints::Query& query) {
    const auto not_ready = controller.NotReady();
    if (query.contains("verbose")) {
      return not_ready ? endpoints::Response{503, "[-]watches failed: " + *not_ready +
                                                      "\nreadyz check failed\n"}
                       : endpoints::Response{200, "[+]watches ok\nreadyz check passed\n"};
    }
    return not_ready ? endpoints::Response{503, "not ready: " + *not_ready + "\n"}
                     : endpoints::Response{200, "ok\n"};
  };
  return routes;
}

}  // namespace

CLI::App* AddControllerCommand(CLI::App& app, ControllerOptions& options) {
  CLI::App* command =
      app.add_subcommand("controller",
                         "One controller for every webhook of the cluster: Services annotated "
                         "certctl.io/serving-cert-secret get a managed Secret, targets annotated "
                         "certctl.io/inject-ca-from get its CA");
  AddConnectionFlags(*command, options.connection);
  command->add_option("--qps", options.connection.kube_api_qps, "The same as --kube-api-qps");
  command->add_option("--burst", options.connection.kube_api_burst, "The same as --kube-api-burst");
  AddIssuanceFlags(*command, options.issuance, /*with_ca_name=*/false);
  command
      ->add_option("--cluster-domain", options.cluster_domain,
                   "Cluster domain of the Services' fully qualified names")
      ->capture_default_str();
  AddDurationFlag(*command, "--renew-before", options.renew_before,
                  "Renew certificates with less validity left than this");
  AddDurationFlag(*command, "--ca-overlap", options.ca_overlap,
                  "After a CA rotation moved the server certificate to the new CA, how long the "
                  "previous CA stays trusted",
                  /*allow_zero=*/true);
  CLI::Option* namespaces =
      command
          ->add_option("-n,--namespace", options.namespaces,
                       "Watch only this namespace (repeatable); default: every namespace")
          ->check(NamespaceNameCheck());
  command
      ->add_option("--namespace-selector", options.namespace_selector,
                   "Watch only the namespaces whose labels match this selector, as they come "
                   "and go")
      ->type_name("SELECTOR")
      ->check(LabelSelectorCheck("namespace"))
      ->excludes(namespaces);
  command->add_flag("--cert-manager-annotations", options.cert_manager_annotations,
                    "Also honour cert-manager.io/inject-ca-from-secret, under cainjector's rule "
                    "(the Secret carries cert-manager.io/allow-direct-injection: \"true\")");
  command->add_option("--workers", options.workers, "Secrets reconciled at once")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  AddDurationFlag(*command, "--resync", options.resync,
                  "Reconcile every annotated Secret at least this often, changes or not");
  AddEndpointFlags(*command, options.endpoints);
  AddLeaseFlags(*command, options.lease,
                "Among several replicas only the holder of a Lease (in the controller's own "
                "namespace) works; every replica watches",
                kDefaultLeaseName);
  return command;
}

int RunClusterController(const ControllerOptions& options, const std::string& command,
                         const Environment& env, const Clock& clock) {
  BlockControlSignals();
  if (options.issuance.cert_validity <= options.renew_before ||
      options.issuance.ca_validity <= options.renew_before) {
    return UsageError(command,
                      "--cert-validity and --ca-validity must be longer than "
                      "--renew-before (" +
                          FormatDuration(options.renew_before) +
                          "), or every reconcile would renew the certificates");
  }
  if (auto valid = CheckLeaseTimes(options.lease); !valid) {
    return UsageError(command, valid.error().message());
  }
  if (auto valid = CheckEndpointFlags(options.endpoints); !valid) {
    return UsageError(command, valid.error().message());
  }

  RaiseOpenFileLimit();
#if defined(__GLIBC__)
  // A thread per watch would otherwise get an arena of its own, each keeping what it freed.
  mallopt(M_ARENA_MAX, 2);
#endif
  metrics::Registry registry;
  fleet::ControllerMetrics controller_metrics(registry);
  kube::ClientOptions client_options;
  client_options.retry.max_retries = 2;
  client_options.retry.on_retry = [](const std::string& message) { spdlog::debug("{}", message); };
  client_options.on_response = [&controller_metrics](const std::string& method, int status) {
    controller_metrics.api_requests.Add({method, status == 0 ? "error" : std::to_string(status)});
  };
  // The Lease lives in the controller's own namespace: -n names watched namespaces instead.
  auto cluster = ConnectToCluster(options.connection, "", env, clock, std::move(client_options));
  if (!cluster) {
    std::cerr << command << ": " << cluster.error().message() << "\n";
    return kExitFailed;
  }
  const std::string identity =
      options.lease.identity.empty() ? InstanceIdentity(env) : options.lease.identity;
  fleet::ControllerConfig config;
  config.issue.key_type = options.issuance.key_type;
  config.issue.ca_validity = options.issuance.ca_validity;
  config.issue.cert_validity = options.issuance.cert_validity;
  config.issue.ca_organization = options.issuance.ca_organization;
  config.issue.renew_before = options.renew_before;
  config.issue.ca_overlap = options.ca_overlap;
  config.issue.cluster_domain = options.cluster_domain;
  config.issue.issuer =
      MakeIssuer(options.issuance, options.cluster_domain, "controller", identity, clock.Now());
#if defined(__GLIBC__)
  // Freed memory stays with the allocator's per-thread arenas otherwise.
  config.on_idle = [] { malloc_trim(0); };
#endif
  config.namespaces = options.namespaces;
  config.namespace_selector = options.namespace_selector;
  config.cert_manager_annotations = options.cert_manager_annotations;
  config.workers = options.workers;
  config.resync = options.resync;
  config.instance = identity;
  if (options.lease.leader_elect) {
    config.election = leader::ElectionConfig{
        cluster->ns,
        options.lease.lease_name.empty() ? kDefaultLeaseName : options.lease.lease_name,
        identity,
        options.lease.lease_duration,
        options.lease.lease_renew_deadline,
        options.lease.lease_retry_period};
  }

  fleet::Controller controller(*cluster->client, clock, std::move(config), controller_metrics,
                               LogToSpdlog);
  auto servers = StartEndpoints(options.endpoints, HealthRoutes(controller), registry);
  if (!servers) {
    return UsageError(command, servers.error().message());
  }
  spdlog::info("controller for {} ({}); {}",
               options.namespaces.empty() ? std::string("every namespace")
                                          : "namespaces " + JoinWithCommas(options.namespaces),
               cluster->description, servers->Ports());
  {
    SignalThread signals([&controller] { controller.Stop(); }, [] {});
    controller.Run();
  }
  spdlog::info("stopped");
  return kExitOk;
}

}  // namespace certctl::cli
