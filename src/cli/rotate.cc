#include "cli/rotate.h"

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <utility>

#include "certctl/controller/converge.h"
#include "certctl/controller/rotation.h"
#include "certctl/controller/secret.h"
#include "certctl/kube/object.h"
#include "certctl/pki/certificate.h"
#include "certctl/util/base64.h"
#include "certctl/util/duration.h"

#include "cli/exit_codes.h"
#include "cli/flags.h"

namespace certctl::cli {
namespace {

using Json = nlohmann::json;
constexpr std::chrono::milliseconds kPollInterval{100};

// What rotate prints, each line after the command as the user typed it: progress on stdout,
// the reason it failed on stderr.
class Reporter {
 public:
  explicit Reporter(std::string command) : command_(std::move(command)) {}

  void Say(const std::string& message) const {
    std::cout << command_ << ": " << message << std::endl;
  }

  int Failed(const std::string& message) const {
    std::cerr << command_ << ": " << message << "\n";
    return kExitFailed;
  }

 private:
  std::string command_;
};

// What `rotate` watches in the Secret: the request, the phase, and which CA and leaf it holds.
struct Snapshot {
  controller::RotationState rotation;
  std::string first_ca;  // SHA-256 fingerprint of the first certificate of ca.crt
  std::string tls_crt;
  std::size_t cas = 0;
};

Result<Snapshot> Read(kube::Client& client, const controller::SecretSpec& spec) {
  const std::string object = controller::SecretObjectName(spec.ns, spec.name);
  auto current = client.Get(kube::kSecrets, spec.ns, spec.name);
  if (!current) {
    return Fail(current.error().Wrap("get " + object));
  }
  if (!current->has_value()) {
    return Fail(ErrorCode::kNotFound, object + " was deleted during the rotation");
  }
  auto pair = controller::ReadSecretPair(**current);
  if (!pair) {
    return Fail(pair.error());
  }
  // For the progress shown: a value certctl never writes is the controller's to repair.
  auto rotation = controller::ReadRotationAnnotations(**current, object);
  if (!rotation) {
    return Fail(rotation.error());
  }
  Snapshot snapshot;
  snapshot.rotation = rotation->state;
  snapshot.tls_crt = pair->source.cert_pem.value_or("");
  if (pair->source.ca_pem) {
    if (auto cas = pki::ParseCertificateBundle(*pair->source.ca_pem); cas && !cas->empty()) {
      snapshot.first_ca = cas->front().Info().sha256_fingerprint;
      snapshot.cas = cas->size();
    }
  }
  return snapshot;
}

std::string Until(const controller::RotationState& rotation) {
  return rotation.previous_ca_until ? FormatRfc3339(*rotation.previous_ca_until) : "it expires";
}

// Prints each step of a CA rotation as it is seen in the Secret.
class Progress {
 public:
  explicit Progress(const Reporter& reporter) : reporter_(reporter) {}

  void Show(const Snapshot& now) {
    if (now.rotation.phase == shown_) {
      return;
    }
    switch (now.rotation.phase) {
      case controller::RotationPhase::kTrusting:
        reporter_.Say(
            "step 1 of 3: a new CA is stored next to the current one and injected into every "
            "target; the server certificate stays with the current CA until they all trust it");
        break;
      case controller::RotationPhase::kOverlapping:
        if (shown_ != controller::RotationPhase::kTrusting) {
          Snapshot trusting;
          trusting.rotation.phase = controller::RotationPhase::kTrusting;
          Show(trusting);
        }
        reporter_.Say(
            "step 2 of 3: the server certificate is issued by the new CA; the previous CA stays "
            "trusted until " +
            Until(now.rotation));
        break;
      case controller::RotationPhase::kNone:
        reporter_.Say("step 3 of 3: the previous CA left the bundle");
        break;
    }
    shown_ = now.rotation.phase;
  }

 private:
  const Reporter& reporter_;
  controller::RotationPhase shown_ = controller::RotationPhase::kNone;
};

// Done: the request is gone and it changed what it was for (for a CA: the leaf moved to a new
// CA, so the phase is past "trusting").
bool Done(const Snapshot& before, const Snapshot& now, bool ca) {
  if (now.rotation.requested != controller::RotationRequest::kNone) {
    return false;
  }
  if (!ca) {
    return now.tls_crt != before.tls_crt;
  }
  // Joined in step 1, the new CA was already first in ca.crt: leaving step 1 is the news.
  return now.rotation.phase != controller::RotationPhase::kTrusting &&
         (now.first_ca != before.first_ca ||
          before.rotation.phase == controller::RotationPhase::kTrusting);
}

// The holder of the controllers' Lease (leader election), when one is named in it.
struct LeaseHolder {
  std::string identity;
  std::chrono::seconds duration{0};  // how long a silent holder keeps it
};

// A Lease that cannot be read (absent, or not this user's to read) names no holder: rotate then
// waits no longer than --controller-timeout, as without leader election.
std::optional<LeaseHolder> ReadLeaseHolder(kube::Client& client, const std::string& ns,
                                           const std::string& name) {
  auto lease = client.Get(kube::kLeases, ns, name);
  if (!lease || !lease->has_value()) {
    return std::nullopt;
  }
  const Json& object = **lease;
  const auto spec = object.find("spec");
  if (spec == object.end() || !spec->is_object()) {
    return std::nullopt;
  }
  const auto identity = spec->find("holderIdentity");
  const auto duration = spec->find("leaseDurationSeconds");
  if (identity == spec->end() || !identity->is_string() || identity->get<std::string>().empty() ||
      duration == spec->end() || !duration->is_number_integer()) {
    return std::nullopt;
  }
  // A duration no client-go or certctl writes is capped: rotate's own --timeout still bounds it.
  const auto seconds = std::clamp<std::int64_t>(duration->get<std::int64_t>(), 1, 3600);
  return LeaseHolder{identity->get<std::string>(), std::chrono::seconds(seconds)};
}

}  // namespace

CLI::App* AddRotateCommand(CLI::App& app, RotateOptions& options) {
  CLI::App* command = app.add_subcommand(
      "rotate",
      "Rotate now: ask the controller (or, with none running, do it here) to re-issue the "
      "server certificate, or with --ca to replace the CA in steps that never break trust");
  command->add_flag("--ca", options.ca,
                    "Replace the CA (and then the server certificate), not only the server "
                    "certificate");
  command->add_flag("--wait", options.wait,
                    "Return once the server certificate is issued by the new CA (or re-issued) "
                    "and every target trusts it, printing each step");
  AddDurationFlag(*command, "--controller-timeout", options.controller_timeout,
                  "How long a running controller has to take the request before this command "
                  "carries it out itself",
                  /*allow_zero=*/true);
  AddDurationFlag(*command, "--timeout", options.timeout,
                  "How long the whole rotation may take, waiting for targets included");
  command
      ->add_option("--lease-name", options.lease_name,
                   "The Lease of the controllers' leader election (run's --lease-name; default: "
                   "<secret>-certctl): while it names a leader that has not taken the request "
                   "(one that stopped without giving it up), wait for the next leader up to the "
                   "Lease's duration more")
      ->check(ObjectNameCheck("Lease"));
  AddSecretFlags(*command, options.secret);
  AddConnectionFlags(*command, options.connection);
  AddTargetFlags(*command, options.targets, TargetRole::kInject);
  return command;
}

int RunRotate(const RotateOptions& options, const std::string& command, const Environment& env,
              const Clock& clock) {
  const Reporter reporter(command);
  if (auto valid = CheckValidities(options.secret); !valid) {
    std::cerr << command << ": " << valid.error().message() << "\n";
    return kExitUsage;
  }
  const TimePoint deadline = SaturatingAdd(clock.Now(), options.timeout);
  auto cluster = ConnectUntil(options.connection, options.secret.identity.namespace_name, env,
                              clock, deadline);
  if (!cluster) {
    return reporter.Failed(cluster.error().message());
  }
  // Where the Secret is; what it must hold is only needed to rotate without a controller.
  controller::SecretSpec spec;
  spec.ns = cluster->ns;
  spec.name = options.secret.secret_name;
  const std::string object = controller::SecretObjectName(spec.ns, spec.name);
  kube::Client& client = *cluster->client;

  auto before = Read(client, spec);
  if (!before) {
    return reporter.Failed(before.error().code() == ErrorCode::kNotFound
                               ? object + " does not exist: there is nothing to rotate"
                               : before.error().message());
  }
  const auto request =
      options.ca ? controller::RotationRequest::kCa : controller::RotationRequest::kLeaf;
  // Set even when a CA rotation is in step 1 already: a controller clears it when it moves the
  // leaf, and with none running this command carries that rotation on instead of starting one.
  auto marked = controller::RequestRotation(client, spec.ns, spec.name, request);
  if (!marked) {
    return reporter.Failed(marked.error().message());
  }
  if (options.ca && before->rotation.phase == controller::RotationPhase::kTrusting) {
    reporter.Say(
        "a CA rotation of " + object +
        " is already under way (step 1 stored); asked to carry it on with the CA stored then");
  } else {
    reporter.Say(std::string("asked for a new ") + (options.ca ? "CA" : "server certificate") +
                 " in " + object);
  }

  // A running controller watches the Secret and takes the request at once. Controllers with
  // leader election whose leader died without giving the Lease up take it once the Lease runs
  // out: while it names a holder, the wait is that much longer, once.
  const std::string lease_name =
      options.lease_name.empty() ? spec.name + "-certctl" : options.lease_name;
  const TimePoint asked_at = clock.Now();
  TimePoint taken_by = SaturatingAdd(asked_at, options.controller_timeout);
  bool waited_for_leader = false;
  std::optional<Snapshot> now;
  Progress progress(reporter);
  for (;;) {
    auto read = Read(client, spec);
    if (!read) {
      return reporter.Failed(read.error().message());
    }
    now = std::move(*read);
    if (options.ca) {
      progress.Show(*now);
    }
    if (now->rotation.requested == controller::RotationRequest::kNone) {
      break;
    }
    if (clock.Now() >= taken_by) {
      if (waited_for_leader) {
        break;
      }
      waited_for_leader = true;
      const auto holder = ReadLeaseHolder(client, spec.ns, lease_name);
      if (!holder) {
        break;
      }
      const std::chrono::seconds more = holder->duration + options.controller_timeout;
      reporter.Say("lease/" + spec.ns + "/" + lease_name + " names the leader " + holder->identity +
                   ", which has not taken the request (it may have stopped without giving the "
                   "Lease up); waiting up to " +
                   FormatDuration(more) + " more for the next leader");
      taken_by = std::min(SaturatingAdd(clock.Now(), more), deadline);
    }
    clock.Sleep(kPollInterval);
  }
  const std::string waited =
      FormatDuration(std::chrono::duration_cast<std::chrono::seconds>(clock.Now() - asked_at));

  if (now->rotation.requested != controller::RotationRequest::kNone) {
    // Nobody took it: carry it out here, with the same steps and checks.
    if (options.ca && options.targets.empty()) {
      return reporter.Failed(
          "no controller took the request within " + waited +
          ", and without targets (--validating-webhook, --mutating-webhook, --crd, --apiservice "
          "or --webhook-selector) the new CA cannot be injected from here; the request stays on " +
          object + " for the next certctl job or run");
    }
    if (options.secret.identity.service.empty()) {
      return reporter.Failed(
          "no controller took the request within " + waited +
          "; to rotate here, give --service and the other flags certctl job or run use "
          "for " +
          object + "; the request stays on it for the next certctl job or run");
    }
    auto made = MakeSecretSpec(options.secret, cluster->ns);
    if (!made) {
      std::cerr << command << ": " << made.error().message() << "\n";
      return kExitUsage;
    }
    spec = std::move(*made);
    spec.issuer = MakeIssuer(options.secret, "rotate", InstanceIdentity(env), clock.Now());
    reporter.Say("no controller took the request within " + waited + "; rotating here");
    controller::ConvergeOptions converge;
    converge.inject = !options.targets.empty();
    converge.inject_options.deadline = deadline;
    converge.inject_options.wait_for_targets = options.timeout;
    converge.on_secret = [&](const controller::SecretOutcome& outcome) {
      if (outcome.action == controller::SecretAction::kLeafReissued) {
        reporter.Say("re-issued the server certificate");
      } else if (outcome.action == controller::SecretAction::kCaReplaced) {
        reporter.Say("replaced the CA and the server certificate at once: " + outcome.reason);
      } else if (outcome.action != controller::SecretAction::kNone) {
        progress.Show(Snapshot{outcome.rotation, "", "", 0});
      }
    };
    converge.on_inject = [&](const controller::InjectOutcome& outcome) {
      if (outcome.patched_objects > 0) {
        reporter.Say("injected the CA bundle into " + std::to_string(outcome.patched_slots) +
                     " of " + std::to_string(outcome.slots) + " caBundle(s)");
      }
    };
    auto outcome = controller::Converge(client, spec, options.targets, converge, clock);
    if (!outcome) {
      return reporter.Failed(outcome.error().message());
    }
    if (outcome->rotation.phase == controller::RotationPhase::kTrusting) {
      return reporter.Failed(
          "the new CA is trusted by no target yet; the next certctl job or run "
          "continues the rotation");
    }
    reporter.Say("done");
    return kExitOk;
  }

  if (!options.wait) {
    reporter.Say("a controller took the request");
    return kExitOk;
  }
  for (;;) {
    if (options.ca) {
      progress.Show(*now);
    }
    if (Done(*before, *now, options.ca)) {
      reporter.Say(options.ca
                       ? "done: the server certificate is issued by the new CA, which every target "
                         "trusts"
                       : "done: the server certificate was re-issued");
      return kExitOk;
    }
    if (clock.Now() >= deadline) {
      return reporter.Failed("the rotation did not finish within " +
                             FormatDuration(options.timeout));
    }
    clock.Sleep(kPollInterval);
    auto read = Read(client, spec);
    if (!read) {
      return reporter.Failed(read.error().message());
    }
    now = std::move(*read);
  }
}

}  // namespace certctl::cli
