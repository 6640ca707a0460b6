// What the sidecar tells of its writes: log lines, metrics and Events; and the failurePolicy
// it writes once ready.
#include "certctl/controller/failure_policy.h"
#include "certctl/controller/secret.h"
#include "certctl/loop/events.h"
#include "certctl/loop/sidecar.h"

namespace certctl::loop {
namespace {

// "validatingwebhookconfiguration/hook" -> "validatingwebhookconfiguration".
std::string KindOf(const std::string& object) { return object.substr(0, object.find('/')); }

}  // namespace

void Sidecar::TellWrites(const PassReport& report) {
  const std::string secret = config_.pass.secret.ns + "/" + config_.pass.secret.name;
  const std::string secret_object =
      controller::SecretObjectName(config_.pass.secret.ns, config_.pass.secret.name);
  for (const SecretChange& change : report.secret_changes) {
    metrics_.writes.Add({"secret"});
    if (change.action == controller::SecretAction::kCaRotationStarted ||
        change.action == controller::SecretAction::kCaReplaced) {
      metrics_.rotations.Add({"ca"});
    } else if (change.action == controller::SecretAction::kLeafReissued) {
      metrics_.rotations.Add({"leaf"});
    }
    log_(LogLevel::kInfo, std::string(controller::SecretActionName(change.action)) + ": " +
                              secret_object +
                              (change.reason.empty() ? "" : " (" + change.reason + ")"));
  }
  std::set<std::string> current;
  for (const controller::RotationProblem& problem : report.rotation_problems) {
    const std::string key = problem.annotation + "=" + problem.value;
    current.insert(key);
    if (!warned_rotation_.contains(key)) {
      log_(LogLevel::kWarning, secret_object + ": " + problem.message);
    }
  }
  // A value that clears and comes back (re-applied by a GitOps sync) is told again.
  warned_rotation_ = std::move(current);
  metrics_.rotation_phase.Set({secret}, static_cast<double>(report.rotation));
  next_step_at_ = report.next_step_at;
  for (const std::string& object : report.patched) {
    metrics_.writes.Add({KindOf(object)});
    log_(LogLevel::kInfo, "injected the CA bundle into " + object);
  }
}

void Sidecar::RecordWrites(const PassReport& report) {
  const auto& secret = config_.pass.secret;
  const std::string secret_object = controller::SecretObjectName(secret.ns, secret.name);
  std::vector<kube::Json> events;
  for (const SecretChange& change : report.secret_changes) {
    const controller::ObjectReference secret_reference{"v1", "Secret", secret.ns, secret.name,
                                                       change.uid};
    const std::string why = change.reason.empty() ? "" : ": " + change.reason;
    const auto about_secret = [&](std::string_view reason, const std::string& message) {
      events.push_back(
          MakeEvent(secret_reference, reason, message, config_.instance, clock_.Now()));
    };
    switch (change.action) {
      case controller::SecretAction::kNone:
        break;
      case controller::SecretAction::kCreated:
        about_secret("Created", "created with a new CA and server certificate");
        break;
      case controller::SecretAction::kLeafReissued:
        about_secret("LeafReissued", "re-issued the server certificate" + why);
        break;
      case controller::SecretAction::kCaReplaced:
        about_secret("CAReplaced", "replaced the CA and the server certificate" + why);
        break;
      case controller::SecretAction::kCaRotationStarted:
        about_secret("CARotationStarted",
                     "step 1 of 3: a new CA is trusted next to the current one" + why);
        break;
      case controller::SecretAction::kLeafMovedToNewCa:
        about_secret("CARotationLeafMoved",
                     "step 2 of 3: the server certificate is issued by the new CA" + why);
        break;
      case controller::SecretAction::kPreviousCaRetired:
        about_secret("CARotationFinished",
                     "step 3 of 3: the previous CA is no longer trusted" + why);
        break;
      case controller::SecretAction::kAdopted:
        about_secret("Adopted", "now managed by certctl");
        break;
      case controller::SecretAction::kRepaired:
        about_secret("Repaired", "removed what did not belong" + why);
        break;
    }
  }
  for (const controller::ObjectReference& target : report.patched_references) {
    events.push_back(MakeEvent(target, "CABundleInjected",
                               "injected the CA bundle of " + secret_object, config_.instance,
                               clock_.Now()));
  }
  for (const kube::Json& event : events) {
    if (auto recorded = RecordEvent(client_, event); !recorded) {
      WarnRateLimited("events", recorded.error().message());
    }
  }
}

void Sidecar::FailClosed(const std::vector<controller::TargetObject>& targets) {
  auto closed = controller::FailClosed(client_, targets);
  if (!closed) {
    WarnRateLimited("failure-policy", closed.error().message());
    return;
  }
  const std::string secret_object =
      controller::SecretObjectName(config_.pass.secret.ns, config_.pass.secret.name);
  for (std::size_t i = 0; i < closed->patched.size(); ++i) {
    metrics_.writes.Add({KindOf(closed->patched[i])});
    log_(LogLevel::kInfo, "ready: set failurePolicy Fail on the entries of " + closed->patched[i] +
                              " that had Ignore");
    const kube::Json event = MakeEvent(
        closed->patched_references[i], "FailurePolicySet",
        "set failurePolicy Fail on the entries that had Ignore, as " + secret_object + " is ready",
        config_.instance, clock_.Now());
    if (auto recorded = RecordEvent(client_, event); !recorded) {
      WarnRateLimited("events", recorded.error().message());
    }
  }
}

}  // namespace certctl::loop
