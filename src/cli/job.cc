#include "cli/job.h"

#include <iostream>

#include <spdlog/spdlog.h>

#include "certctl/controller/callable.h"
#include "certctl/controller/converge.h"
#include "certctl/controller/failure_policy.h"
#include "certctl/controller/other_callers.h"
#include "certctl/controller/secret.h"
#include "certctl/probe/handshake.h"
#include "certctl/util/duration.h"
#include "certctl/util/text.h"

#include "cli/exit_codes.h"

namespace certctl::cli {
namespace {

int Failed(const std::string& command, const std::string& message) {
  std::cerr << command << ": " << message << "\n";
  return kExitFailed;
}

std::string Milliseconds(std::chrono::steady_clock::duration elapsed) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()) +
         " ms";
}

void LogSecret(const controller::SecretOutcome& outcome, const std::string& object,
               const std::string& took) {
  for (const controller::RotationProblem& problem : outcome.rotation_problems) {
    spdlog::warn("{}: {}", object, problem.message);
  }
  for (const controller::OtherCaller& caller : outcome.other_callers.found) {
    spdlog::warn("--force-reissue: {}", controller::BrokenCallerWarning(caller, object));
  }
  if (const auto& not_looked = outcome.other_callers.not_looked; not_looked) {
    const auto notice = controller::NoticeOfNotLooked(*not_looked, object);
    spdlog::log(notice.refused ? spdlog::level::debug : spdlog::level::warn, "{}", notice.line);
  }
  if (!outcome.names_dropped.empty() && outcome.other_callers.found.empty()) {
    spdlog::warn(
        "the server certificate in {} no longer names {}: a webhook that calls them fails the "
        "API server's TLS check now. If another webhook uses this Secret, give each its own "
        "--secret",
        object, JoinWithCommas(outcome.names_dropped));
  }
  switch (outcome.action) {
    case controller::SecretAction::kNone:
      spdlog::info("{} is valid{}; nothing to do ({})", object,
                   outcome.managed ? "" : " (external, not managed by certctl)", took);
      break;
    case controller::SecretAction::kCreated:
      spdlog::info("created {} with a new CA and server certificate ({})", object, took);
      break;
    case controller::SecretAction::kLeafReissued:
      spdlog::info("re-issued the server certificate in {}: {} ({})", object, outcome.reason, took);
      break;
    case controller::SecretAction::kCaReplaced:
      spdlog::info("replaced the CA and server certificate in {}: {} ({})", object, outcome.reason,
                   took);
      break;
    case controller::SecretAction::kCaRotationStarted:
      spdlog::info(
          "CA rotation step 1 of 3 in {}: a new CA is stored next to the current one, "
          "which still issues the served certificate: {} ({})",
          object, outcome.reason, took);
      break;
    case controller::SecretAction::kLeafMovedToNewCa:
      spdlog::info(
          "CA rotation step 2 of 3 in {}: the server certificate is issued by the new "
          "CA ({}); the previous CA stays trusted until {} ({})",
          object, outcome.reason,
          outcome.rotation.previous_ca_until ? FormatRfc3339(*outcome.rotation.previous_ca_until)
                                             : "it expires",
          took);
      break;
    case controller::SecretAction::kPreviousCaRetired:
      spdlog::info("CA rotation step 3 of 3 in {}: {}; the previous CA left the bundle ({})",
                   object, outcome.reason, took);
      break;
    case controller::SecretAction::kAdopted:
      spdlog::info("adopted {}: now managed by certctl ({})", object, took);
      break;
    case controller::SecretAction::kRepaired:
      spdlog::info("repaired {}: {} ({})", object, outcome.reason, took);
      break;
  }
}

void LogInjected(const controller::InjectOutcome& outcome, const std::string& took) {
  if (!outcome.missing.empty()) {
    spdlog::info("not found yet, left to the inject phase: {}", JoinWithCommas(outcome.missing));
  }
  if (outcome.patched_objects == 0) {
    spdlog::info("all {} caBundle(s) in {} object(s) already hold the CA bundle ({})",
                 outcome.slots, outcome.objects, took);
    return;
  }
  spdlog::info("injected the CA bundle into {} of {} caBundle(s): {} ({})", outcome.patched_slots,
               outcome.slots, JoinWithCommas(outcome.patched), took);
}

// The API server's handshake with the webhook, tried until it verifies or `deadline`: the
// webhook's pods may still be starting when a post-install hook runs.
Status WaitForServing(const HostPort& address, const std::string& server_name,
                      const std::string& bundle, TimePoint deadline, const Clock& clock) {
  std::chrono::milliseconds retry{100};
  for (;;) {
    auto verified =
        probe::VerifyHandshake(address, server_name, bundle, std::chrono::milliseconds(2000));
    if (verified || clock.Now() >= deadline) {
      return verified;
    }
    spdlog::debug("serving check: {}", verified.error().message());
    clock.Sleep(std::min<std::chrono::milliseconds>(
        retry, std::chrono::ceil<std::chrono::milliseconds>(deadline - clock.Now())));
    retry = std::min(retry * 2, std::chrono::milliseconds(1000));
  }
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
  AddTargetFlags(*command, options.targets, TargetRole::kInject);
  AddDurationFlag(*command, "--wait-for-targets", options.wait_for_targets,
                  "How long the job may take: waiting for targets that do not exist yet and "
                  "retrying failed API requests",
                  /*allow_zero=*/true);
  AddServingAddressFlag(*command, options.serving_addr,
                        "After injecting, wait (within --wait-for-targets) until a TLS handshake "
                        "with the webhook (HOST:PORT, e.g. the Service's address) verifies "
                        "against the injected caBundle for <service>.<namespace>.svc; exit 1 if "
                        "it never does");
  AddFailurePolicyOnceReadyFlag(*command, options.failure_policy_once_ready);
  command->add_flag("--force-reissue", options.force_reissue,
                    "Re-issue the server certificate even when it drops names that webhook "
                    "configurations other than the targets call with this Secret's CA (they "
                    "fail then); without it the job refuses and names them");
  return command;
}

int RunJob(const JobOptions& options, const std::string& command, const Environment& env,
           const Clock& clock) {
  const bool ensure = options.phase != "inject";
  const bool inject = options.phase != "secret";
  if (inject && options.targets.empty()) {
    std::cerr << command << ": the " << options.phase
              << " phase needs a target: --validating-webhook, --mutating-webhook, --crd, "
                 "--apiservice or --webhook-selector\n";
    return kExitUsage;
  }
  if (auto valid = CheckValidities(options.secret); !valid) {
    std::cerr << command << ": " << valid.error().message() << "\n";
    return kExitUsage;
  }
  auto serving_address = ParseServingAddress(options.serving_addr);
  if (!serving_address) {
    std::cerr << command << ": " << serving_address.error().message() << "\n";
    return kExitUsage;
  }
  if (!inject && (*serving_address || !options.failure_policy_once_ready.empty())) {
    std::cerr << command
              << ": --serving-addr and --failure-policy-once-ready belong to the "
                 "inject phase (--phase inject or all), when the targets hold the bundle\n";
    return kExitUsage;
  }

  // One deadline for the whole job: waiting for targets and riding out API failures (5xx,
  // 429, timeouts, resets) both end --wait-for-targets after the start, so a hook can neither
  // hang a `helm upgrade` nor fail it over a blip.
  const TimePoint deadline = SaturatingAdd(clock.Now(), options.wait_for_targets);
  auto cluster = ConnectUntil(options.connection, options.secret.identity.namespace_name, env,
                              clock, deadline);
  if (!cluster) {
    return Failed(command, cluster.error().message());
  }
  auto made = MakeSecretSpec(options.secret, cluster->ns);
  if (!made) {
    std::cerr << command << ": " << made.error().message() << "\n";
    return kExitUsage;
  }
  made->refuse_to_break_other_callers = !options.force_reissue;
  made->issuer = MakeIssuer(options.secret, "job", InstanceIdentity(env), clock.Now());
  const controller::SecretSpec& spec = *made;
  const std::string secret_object = controller::SecretObjectName(spec.ns, spec.name);

  // Each step is logged with the time it took since the previous one.
  auto step_started = std::chrono::steady_clock::now();
  const auto took = [&] {
    const auto now = std::chrono::steady_clock::now();
    const std::string text = Milliseconds(now - step_started);
    step_started = now;
    return text;
  };
  controller::ConvergeOptions converge;
  converge.ensure_secret = ensure;
  converge.inject = inject;
  converge.inject_options.wait_for_targets = options.wait_for_targets;
  converge.inject_options.deadline = deadline;
  converge.inject_options.on_waiting = [](const std::string& line) { spdlog::info(line); };
  converge.on_secret = [&](const controller::SecretOutcome& outcome) {
    LogSecret(outcome, secret_object, took());
  };
  std::optional<std::vector<controller::TargetObject>> injected_targets;
  converge.on_inject = [&](const controller::InjectOutcome& outcome) {
    LogInjected(outcome, took());
    injected_targets = outcome.targets;
  };
  auto outcome = controller::Converge(*cluster->client, spec, options.targets, converge, clock);
  if (!outcome) {
    return Failed(command, outcome.error().message());
  }
  if (outcome->rotation.phase == controller::RotationPhase::kTrusting) {
    spdlog::info(
        "{}: the CA rotation waits for the targets to trust the new CA; the inject "
        "phase (or a running controller) injects it and moves the server certificate",
        secret_object);
  }
  // The bundle is in place; whether the API server can call what the targets name is the
  // last word (SPEC 4a), so a Helm install fails now rather than at its first admission call.
  if (inject && injected_targets && outcome->validation.leaf) {
    const std::vector<Finding> findings =
        controller::CallFindings(*injected_targets, *outcome->validation.leaf);
    if (!findings.empty()) {
      return Failed(command,
                    "the CA bundle is injected, but the API server cannot call every target: " +
                        JoinFindings(findings));
    }
  }
  if (*serving_address) {
    const std::string server_name = pki::RequiredDnsNames(spec.identity).front();
    if (auto served =
            WaitForServing(**serving_address, server_name, outcome->ca_bundle, deadline, clock);
        !served) {
      return Failed(command, "the webhook at " + FormatHostPort(**serving_address) +
                                 " did not verify against the injected caBundle within " +
                                 FormatDuration(options.wait_for_targets) + ": " +
                                 served.error().message());
    }
    spdlog::info("the webhook at {} verifies against the injected caBundle for {} ({})",
                 FormatHostPort(**serving_address), server_name, took());
  }
  // Ready: every bundle read back (Converge), every name covered and, with --serving-addr,
  // a verified handshake.
  if (!options.failure_policy_once_ready.empty() && injected_targets) {
    // Fail only where the API server can call: the Service, its port, a ready endpoint.
    const pki::CertificateInfo* leaf =
        outcome->validation.leaf ? &*outcome->validation.leaf : nullptr;
    auto closable =
        controller::JudgeClosableUntil(*cluster->client, *injected_targets, leaf, deadline, clock);
    if (!closable) {
      return Failed(command, closable.error().message());
    }
    auto closed = controller::FailClosed(*cluster->client, *injected_targets, &*closable);
    if (!closed) {
      return Failed(command, closed.error().message());
    }
    for (const std::string& object : closed->held) {
      spdlog::warn("{} carries {}: its failurePolicy is left as it is", object,
                   controller::kHoldFailurePolicyAnnotation);
    }
    if (closed->entries == 0 && closable->kept == 0) {
      spdlog::info("every webhook entry already has failurePolicy Fail ({})", took());
    } else if (closed->entries == 0) {
      // The entries kept at Ignore are named in the error that follows.
      spdlog::info("no webhook entry changed to failurePolicy Fail ({})", took());
    } else {
      spdlog::info("set failurePolicy Fail on {} webhook entr{} that had Ignore: {} ({})",
                   closed->entries, closed->entries == 1 ? "y" : "ies",
                   JoinWithCommas(closed->patched), took());
    }
    if (closable->kept > 0) {
      std::string why = JoinFindings(closable->findings);
      for (const std::string& note : closable->notes) {
        why += (why.empty() ? "" : "; ") + note;
      }
      return Failed(command, "kept failurePolicy Ignore on " + std::to_string(closable->kept) +
                                 (closable->kept == 1 ? " webhook entry" : " webhook entries") +
                                 " the API server cannot call: " + why);
    }
  }
  return kExitOk;
}

}  // namespace certctl::cli
