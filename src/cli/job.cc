#include "cli/job.h"

#include <iostream>

#include <spdlog/spdlog.h>

#include "certctl/controller/ensure_secret.h"
#include "certctl/controller/inject.h"
#include "certctl/controller/secret.h"
#include "certctl/util/duration.h"

#include "cli/exit_codes.h"

namespace certctl::cli {
namespace {

int Failed(const std::string& message) {
  std::cerr << "certctl job: " << message << "\n";
  return kExitFailed;
}

std::string Milliseconds(std::chrono::steady_clock::duration elapsed) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()) +
         " ms";
}

// The CA bundle for the inject phase: ca.crt of the Secret, which must hold a valid pair.
// One GET: a steady cluster sees one read per object.
Result<std::string> StoredBundle(kube::Client& client, const std::string& ns,
                                 const std::string& name, const pki::ValidationPolicy& policy,
                                 const Clock& clock) {
  const std::string object = controller::SecretObjectName(ns, name);
  auto stored = controller::ReadStoredSecret(client, ns, name, policy, clock.Now());
  if (!stored) {
    return Fail(stored.error());
  }
  if (!stored->has_value()) {
    return Fail(ErrorCode::kNotFound, object + " does not exist; run the secret phase first");
  }
  if (!(*stored)->findings.empty()) {
    return Fail(ErrorCode::kFailedPrecondition, object + " does not hold a valid pair (" +
                                                    JoinFindings((*stored)->findings) +
                                                    "); run the secret phase first");
  }
  return *(*stored)->pair.source.ca_pem;
}

}  // namespace

CLI::App* AddJobCommand(CLI::App& app, JobOptions& options) {
  CLI::App* command = app.add_subcommand(
      "job", "One-shot Helm hook: ensure the Secret holds a valid pair, inject its CA bundle");
  command
      ->add_option("--phase", options.phase,
                   "secret: ensure the Secret (pre-install); inject: inject its CA bundle "
                   "into the targets (post-install); all: both")
      ->check(CLI::IsMember({"all", "secret", "inject"}))
      ->capture_default_str();
  AddSecretFlags(*command, options.secret);
  AddConnectionFlags(*command, options.connection);
  AddTargetFlags(*command, options.targets);
  AddDurationFlag(*command, "--wait-for-targets", options.wait_for_targets,
                  "How long the job may take: waiting for targets that do not exist yet and "
                  "retrying failed API requests",
                  /*allow_zero=*/true);
  return command;
}

int RunJob(const JobOptions& options, const Environment& env, const Clock& clock) {
  const bool ensure = options.phase != "inject";
  const bool inject = options.phase != "secret";
  if (inject && options.targets.empty()) {
    std::cerr << "certctl job: the " << options.phase
              << " phase needs a target: --validating-webhook, --mutating-webhook, --crd, "
                 "--apiservice or --webhook-selector\n";
    return kExitUsage;
  }
  if (auto valid = CheckValidities(options.secret); !valid) {
    std::cerr << "certctl job: " << valid.error().message() << "\n";
    return kExitUsage;
  }

  // One deadline for the whole job: waiting for targets and riding out API failures (5xx,
  // 429, timeouts, resets) both end --wait-for-targets after the start, so a hook can neither
  // hang a `helm upgrade` nor fail it over a blip.
  const TimePoint deadline = SaturatingAdd(clock.Now(), options.wait_for_targets);
  kube::ClientOptions client_options;
  client_options.retry.max_retries = -1;
  client_options.retry.deadline = deadline;
  auto cluster = ConnectToCluster(options.connection, options.secret.identity.namespace_name, env,
                                  clock, std::move(client_options));
  if (!cluster) {
    return Failed(cluster.error().message());
  }
  auto made = MakeSecretSpec(options.secret, cluster->ns);
  if (!made) {
    std::cerr << "certctl job: " << made.error().message() << "\n";
    return kExitUsage;
  }
  const controller::SecretSpec& spec = *made;
  const std::string secret_object = controller::SecretObjectName(spec.ns, spec.name);

  std::string bundle;
  if (ensure) {
    const auto started = std::chrono::steady_clock::now();
    auto outcome = controller::EnsureSecret(*cluster->client, spec, clock);
    if (!outcome) {
      return Failed(outcome.error().message());
    }
    bundle = outcome->ca_bundle;
    const std::string took = Milliseconds(std::chrono::steady_clock::now() - started);
    switch (outcome->action) {
      case controller::SecretAction::kNone:
        spdlog::info("{} is valid{}; nothing to do ({})", secret_object,
                     outcome->managed ? "" : " (external, not managed by certctl)", took);
        break;
      case controller::SecretAction::kCreated:
        spdlog::info("created {} with a new CA and server certificate ({})", secret_object, took);
        break;
      case controller::SecretAction::kLeafReissued:
        spdlog::info("re-issued the server certificate in {}: {} ({})", secret_object,
                     outcome->reason, took);
        break;
      case controller::SecretAction::kCaReplaced:
        spdlog::info("replaced the CA and server certificate in {}: {} ({})", secret_object,
                     outcome->reason, took);
        break;
      case controller::SecretAction::kAdopted:
        spdlog::info("adopted {}: now managed by certctl ({})", secret_object, took);
        break;
    }
  }

  if (inject) {
    if (!ensure) {
      auto stored =
          StoredBundle(*cluster->client, spec.ns, spec.name, controller::PolicyFor(spec), clock);
      if (!stored) {
        return Failed(stored.error().message());
      }
      bundle = std::move(*stored);
    }
    const auto started = std::chrono::steady_clock::now();
    controller::InjectOptions inject_options;
    inject_options.wait_for_targets = options.wait_for_targets;
    inject_options.deadline = deadline;
    auto outcome =
        controller::InjectBundle(*cluster->client, options.targets, bundle, inject_options, clock);
    if (!outcome) {
      return Failed(outcome.error().message());
    }
    const std::string took = Milliseconds(std::chrono::steady_clock::now() - started);
    if (outcome->patched_objects == 0) {
      spdlog::info("all {} caBundle(s) in {} object(s) already hold the CA bundle ({})",
                   outcome->slots, outcome->objects, took);
    } else {
      std::string names;
      for (const std::string& name : outcome->patched) {
        names += (names.empty() ? "" : ", ") + name;
      }
      spdlog::info("injected the CA bundle into {} of {} caBundle(s): {} ({})",
                   outcome->patched_slots, outcome->slots, names, took);
    }
  }
  return kExitOk;
}

}  // namespace certctl::cli
