#include "cli/run.h"

#include <iostream>
#include <memory>
#include <set>

#include <spdlog/spdlog.h>

#include "certctl/controller/failure_policy.h"
#include "certctl/controller/secret.h"
#include "certctl/endpoints/server.h"
#include "certctl/kube/names.h"
#include "certctl/loop/sidecar.h"
#include "certctl/metrics/registry.h"
#include "certctl/pki/names.h"
#include "certctl/util/host_port.h"

#include "cli/exit_codes.h"

namespace certctl::cli {
namespace {

// /readyz in the manner of kube-apiserver: `?exclude=NAME` (repeatable) leaves a check out,
// `?verbose` lists every check. A startup probe excludes `serving`, which cannot pass before
// the webhook container it gates has started.
endpoints::Response Readyz(const loop::Sidecar& sidecar, const endpoints::Query& query) {
  std::set<std::string> requested_exclusions;
  for (auto [entry, end] = query.equal_range("exclude"); entry != end; ++entry) {
    requested_exclusions.insert(entry->second);
  }
  std::set<std::string> excluded = requested_exclusions;  // what is left names no check
  const std::vector<loop::ReadinessCheck> checks = sidecar.Readiness();
  bool ready = true;
  std::string listing;
  for (const loop::ReadinessCheck& check : checks) {
    if (excluded.erase(check.name) > 0) {
      listing += "[+]" + check.name + " excluded: ok\n";
    } else if (check.ok) {
      listing += "[+]" + check.name + " ok\n";
    } else {
      ready = false;
      listing +=
          "[-]" + check.name + (check.unknown ? " unknown: " : " failed: ") + check.reason + "\n";
    }
  }
  for (const std::string& unknown : excluded) {
    listing += "warn: no check named \"" + unknown + "\" to exclude\n";
  }
  // Not a check (it changes no readiness), but what an operator in an incident looks for.
  for (const std::string& object : sidecar.FailurePolicyHolds()) {
    listing += "hold: " + object + " carries " + controller::kHoldFailurePolicyAnnotation +
               ": certctl changes no failurePolicy in it\n";
  }
  if (auto conflict = sidecar.Conflict(); conflict) {
    listing += "conflict: " + *conflict + "\n";
  }
  if (query.contains("verbose")) {
    return {ready ? 200 : 503,
            listing + (ready ? "readyz check passed\n" : "readyz check failed\n")};
  }
  if (ready) {
    return {200, "ok\n"};
  }
  return {503, "not ready: " + sidecar.NotReady(requested_exclusions).value_or("") + "\n"};
}

endpoints::Routes HealthRoutes(const loop::Sidecar& sidecar) {
  endpoints::Routes routes;
  routes["/healthz"] = [&sidecar](const endpoints::Query&) {
    return sidecar.Alive() ? endpoints::Response{200, "ok\n"}
                           : endpoints::Response{500, "the reconcile loop is stuck\n"};
  };
  routes["/readyz"] = [&sidecar](const endpoints::Query& query) { return Readyz(sidecar, query); };
  return routes;
}

}  // namespace

CLI::App* AddRunCommand(CLI::App& app, RunOptions& options) {
  CLI::App* command = app.add_subcommand(
      "run",
      "The sidecar controller: keep the Secret, the certificate folder and every caBundle "
      "right, and report readiness");
  AddSecretFlags(*command, options.secret);
  AddConnectionFlags(*command, options.connection);
  AddTargetFlags(*command, options.targets, TargetRole::kInject);
  command->add_option("--cert-dir", options.cert_dir,
                      "Folder to keep tls.crt, tls.key and ca.crt in (swapped atomically as a "
                      "set); empty: none");
  AddEndpointFlags(*command, options.endpoints);
  command->add_option("--ready-file", options.ready_file,
                      "File created while the certificate check holds (callable and serving aside) "
                      "and removed otherwise; empty: none");
  AddServingAddressFlag(*command, options.serving_addr,
                        "The webhook's own listener (HOST:PORT, e.g. 127.0.0.1:9443): readiness "
                        "also needs a TLS handshake with it that verifies against the targets' "
                        "caBundle for <service>.<namespace>.svc; empty: no such check");
  AddFailurePolicyOnceReadyFlag(*command, options.failure_policy_once_ready);
  AddDurationFlag(*command, "--resync", options.resync,
                  "Reconcile at least this often, changes or not (jittered by 10%)");
  AddLeaseFlags(*command, options.lease,
                "Among several replicas only the holder of a Lease writes; every replica "
                "keeps its own folder and readiness",
                "<secret>-certctl");
  return command;
}

int RunController(const RunOptions& options, const std::string& command, const Environment& env,
                  const Clock& clock) {
  BlockControlSignals();
  if (options.targets.empty()) {
    return UsageError(
        command,
        "a target is needed: --validating-webhook, --mutating-webhook, --crd, --apiservice or "
        "--webhook-selector");
  }
  if (auto valid = CheckValidities(options.secret); !valid) {
    return UsageError(command, valid.error().message());
  }
  const std::string lease_name = options.lease.lease_name.empty()
                                     ? options.secret.secret_name + "-certctl"
                                     : options.lease.lease_name;
  if (auto valid = kube::ValidateSubdomainName(lease_name); options.lease.leader_elect && !valid) {
    // Only the default can get here: a long --secret makes it too long.
    return UsageError(command, "--lease-name: the default Lease name \"" + lease_name +
                                   "\" is not valid: " + valid.error().message() +
                                   "; give --lease-name");
  }
  if (auto valid = CheckLeaseTimes(options.lease); !valid) {
    return UsageError(command, valid.error().message());
  }
  if (auto valid = CheckEndpointFlags(options.endpoints); !valid) {
    return UsageError(command, valid.error().message());
  }
  auto serving_address = ParseServingAddress(options.serving_addr);
  if (!serving_address) {
    return UsageError(command, serving_address.error().message());
  }

  RaiseOpenFileLimit();
  metrics::Registry registry;
  loop::SidecarMetrics sidecar_metrics(registry);
  // Each call gives up soon; the loop retries the whole pass with its own backoff, forever.
  kube::ClientOptions client_options;
  client_options.retry.max_retries = 2;
  client_options.retry.on_retry = [](const std::string& message) { spdlog::debug("{}", message); };
  client_options.on_response = [&sidecar_metrics](const std::string& method, int status) {
    sidecar_metrics.api_requests.Add({method, status == 0 ? "error" : std::to_string(status)});
  };
  auto cluster = ConnectToCluster(options.connection, options.secret.identity.namespace_name, env,
                                  clock, std::move(client_options));
  if (!cluster) {
    std::cerr << command << ": " << cluster.error().message() << "\n";
    return kExitFailed;
  }
  auto spec = MakeSecretSpec(options.secret, cluster->ns);
  if (!spec) {
    return UsageError(command, spec.error().message());
  }

  const std::string identity =
      options.lease.identity.empty() ? InstanceIdentity(env) : options.lease.identity;
  spec->issuer = MakeIssuer(options.secret, "run", identity, clock.Now());
  loop::SidecarConfig config;
  config.pass.secret = *spec;
  config.pass.targets = options.targets;
  config.pass.cert_dir = options.cert_dir;
  config.resync = options.resync;
  config.ready_file = options.ready_file;
  if (*serving_address) {
    // The name the API server verifies when it calls the Service.
    config.serving =
        loop::ServingCheck{**serving_address, pki::RequiredDnsNames(spec->identity).front()};
  }
  config.fail_closed_once_ready = !options.failure_policy_once_ready.empty();
  config.instance = identity;
  if (options.lease.leader_elect) {
    config.election = leader::ElectionConfig{cluster->ns,
                                             lease_name,
                                             identity,
                                             options.lease.lease_duration,
                                             options.lease.lease_renew_deadline,
                                             options.lease.lease_retry_period};
  }

  loop::Sidecar sidecar(*cluster->client, clock, std::move(config), sidecar_metrics, LogToSpdlog);

  auto servers = StartEndpoints(options.endpoints, HealthRoutes(sidecar), registry);
  if (!servers) {
    return UsageError(command, servers.error().message());
  }
  spdlog::info("running for {} in {} ({}); {}", controller::SecretObjectName(spec->ns, spec->name),
               cluster->ns, cluster->description, servers->Ports());
  {
    SignalThread signals([&sidecar] { sidecar.Stop(); },
                         [&sidecar] { sidecar.Reconcile("SIGHUP"); });
    sidecar.Run();
  }
  spdlog::info("stopped");
  return kExitOk;
}

}  // namespace certctl::cli
