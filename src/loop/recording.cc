// What the sidecar tells of its writes: log lines, metrics and Events; and the failurePolicy
// it writes once ready.
#include <algorithm>
#include <utility>

#include "certctl/controller/callable.h"
#include "certctl/controller/failure_policy.h"
#include "certctl/controller/other_callers.h"
#include "certctl/controller/secret.h"
#include "certctl/loop/events.h"
#include "certctl/loop/sidecar.h"
#include "certctl/util/text.h"

namespace certctl::loop {
namespace {

// Webhooks outside the targets remembered as already warned of: a handful in any cluster;
// past this many the memory starts over.
constexpr std::size_t kMaxWarnedOtherCallers = 256;

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
  for (const controller::OtherCaller& caller : report.other_callers) {
    if (warned_other_callers_.size() >= kMaxWarnedOtherCallers) {
      warned_other_callers_.clear();  // told again, rather than remembered without end
    }
    if (warned_other_callers_.insert(caller.Describe()).second) {
      log_(LogLevel::kWarning, controller::BrokenCallerWarning(caller, secret_object));
    }
  }
  if (report.other_callers_not_looked) {
    const auto notice =
        controller::NoticeOfNotLooked(*report.other_callers_not_looked, secret_object);
    if (notice.refused) {
      log_(LogLevel::kDebug, notice.line);
    } else {
      WarnRateLimited("other-callers", notice.line);
    }
  }
  metrics_.rotation_phase.Set({secret}, static_cast<double>(report.rotation));
  next_step_at_ = report.next_step_at;
  for (const std::string& object : report.patched) {
    metrics_.writes.Add({KindOf(object)});
    log_(LogLevel::kInfo, "injected the CA bundle into " + object);
  }
}

void Sidecar::RecordWrites(const PassReport& report) {
  const auto& secret = config_.pass.secret;
  // Folded like the targets' Events: a fight over tls.crt re-issues the leaf at every
  // repair, which is one LeafReissued series, not an Event a repair.
  for (kube::Json& event : WriteEvents(report, secret.ns, secret.name, config_.instance, clock_)) {
    events_.Record(std::move(event));
  }
}

void Sidecar::RecordDueFoldedEvents() {
  if (!election_.Leading()) {
    events_.Clear();  // the leader tells what it does; this replica did nothing more
    return;
  }
  events_.RecordDue();
}

void Sidecar::NoteFailurePolicyHolds(const std::vector<controller::TargetObject>& targets) {
  std::vector<std::string> held = controller::FailurePolicyHolds(targets);
  std::vector<std::string> before;
  {
    const std::lock_guard lock(state_mutex_);
    before = std::exchange(failure_policy_held_, held);
  }
  for (const std::string& object : held) {
    metrics_.failure_policy_held.Set({object}, 1);
    if (std::find(before.begin(), before.end(), object) == before.end()) {
      log_(LogLevel::kWarning, object + " carries " + controller::kHoldFailurePolicyAnnotation +
                                   ": certctl changes no failurePolicy in it until it is removed");
    }
  }
  for (const std::string& object : before) {
    if (std::find(held.begin(), held.end(), object) == held.end()) {
      metrics_.failure_policy_held.Set({object}, 0);
      log_(LogLevel::kInfo,
           object + " no longer carries " + controller::kHoldFailurePolicyAnnotation);
    }
  }
}

void Sidecar::NoteConflict(const std::optional<controller::ConfigurationConflict>& conflict,
                           const std::string& secret_uid) {
  const auto& spec = config_.pass.secret;
  const std::string object = controller::SecretObjectName(spec.ns, spec.name);
  std::optional<std::string> line;
  if (conflict) {
    line = "conflicting-configuration: " + conflict->Describe(object);
  }
  std::optional<std::string> before;
  {
    const std::lock_guard lock(state_mutex_);
    before = std::exchange(conflict_, line);
  }
  metrics_.conflicting_configuration.Set({spec.ns + "/" + spec.name}, line ? 1 : 0);
  if (line == before) {
    return;
  }
  if (!line) {
    log_(LogLevel::kInfo, "no other certctl instance with other settings manages " + object);
    return;
  }
  log_(LogLevel::kWarning, *line);
  events_.Record(MakeEvent({"v1", "Secret", spec.ns, spec.name, secret_uid},
                           "ConflictingConfiguration", *line, config_.instance, clock_.Now(),
                           EventType::kWarning));
}

std::optional<std::string> Sidecar::Conflict() const {
  const std::lock_guard lock(state_mutex_);
  return conflict_;
}

std::vector<std::string> Sidecar::FailurePolicyHolds() const {
  const std::lock_guard lock(state_mutex_);
  return failure_policy_held_;
}

Sidecar::Closing Sidecar::FailClosed(const std::vector<controller::TargetObject>& targets) {
  const auto& spec = config_.pass.secret;
  const Fights::Closing closed = fights_.CloseFailurePolicies(
      client_, targets, controller::SecretObjectName(spec.ns, spec.name));
  if (!closed.failure.empty()) {
    WarnRateLimited("failure-policy", closed.failure);
  }
  if (!closed.kept_because.empty()) {
    WarnRateLimited("failure-policy-kept", closed.kept_because);
  }
  for (const std::string& object : closed.patched) {
    metrics_.writes.Add({KindOf(object)});
  }
  return {closed.held_back, closed.kept_because};
}

}  // namespace certctl::loop
