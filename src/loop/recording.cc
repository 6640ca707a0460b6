// What the sidecar tells of its writes: log lines, metrics and Events; and the failurePolicy
// it writes once ready.
#include <algorithm>
#include <map>
#include <utility>

#include "certctl/controller/callable.h"
#include "certctl/controller/failure_policy.h"
#include "certctl/controller/other_callers.h"
#include "certctl/controller/secret.h"
#include "certctl/inject/patch.h"
#include "certctl/inject/targets.h"
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
  for (kube::Json& event :
       WriteEvents(report, secret.ns, secret.name, config_.instance, clock_.Now())) {
    RecordFoldedEvent(std::move(event));
  }
}

void Sidecar::RecordFoldedEvent(kube::Json event) {
  if (auto write = event_series_.Admit(std::move(event), clock_.Monotonic()); write) {
    if (auto written = WriteSeriesEvent(client_, *write, event_series_, clock_.Now()); !written) {
      WarnRateLimited("events", written.error().message());
    }
  }
}

void Sidecar::RecordDueFoldedEvents() {
  if (!leading_) {
    event_series_.Clear();  // the leader tells what it does; this replica did nothing more
    return;
  }
  for (const EventSeries::Write& write : event_series_.Due(clock_.Monotonic())) {
    if (auto written = WriteSeriesEvent(client_, write, event_series_, clock_.Now()); !written) {
      WarnRateLimited("events", written.error().message());
    }
  }
}

namespace {

// What the failurePolicies of `target` hold, as one value for the damper: the patch that would
// close its closable entries with Ignore, empty once none has (as certctl leaves them).
std::string OpenEntries(const controller::TargetObject& target,
                        const controller::ClosableEntries& closable) {
  const std::string object = controller::TargetObjectName(target.kind, target.name);
  const std::optional<nlohmann::json> patch = inject::FailClosedPatch(
      target.kind, target.object,
      [&](const std::string& entry) { return closable.Closable(object, entry); });
  return patch ? patch->dump() : "";
}

}  // namespace

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
  RecordFoldedEvent(MakeEvent({"v1", "Secret", spec.ns, spec.name, secret_uid},
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
  // Readiness already holds every called name covered; the Services and their endpoints are
  // judged here, and only when some entry still has Ignore.
  Closing closing;
  auto closable = controller::JudgeClosable(client_, targets, nullptr);
  if (!closable) {
    WarnRateLimited("failure-policy", closable.error().message());
    return closing;
  }
  if (closable->kept > 0) {
    std::string why = JoinFindings(closable->findings);
    for (const std::string& note : closable->notes) {
      why += (why.empty() ? "" : "; ") + note;
    }
    closing.kept_because = why.empty() ? "kept" : why;
    WarnRateLimited("failure-policy-kept", "kept failurePolicy Ignore on " +
                                               std::to_string(closable->kept) +
                                               (closable->kept == 1 ? " entry" : " entries") +
                                               " the API server cannot call: " + why);
  }
  // An entry set back to Ignore after certctl closed it is a repair like any other: it waits
  // while the damper holds the configuration.
  std::vector<controller::TargetObject> due;
  std::map<std::string, const controller::TargetObject*> overwritten;
  for (const controller::TargetObject& target : targets) {
    const std::string object = controller::TargetObjectName(target.kind, target.name);
    if (!fights_.Overwritten(object, kFailurePolicyField, OpenEntries(target, *closable))) {
      due.push_back(target);
      continue;
    }
    if (fights_.Damps(object, OtherWriter(target.object, kFailurePolicyField))) {
      closing.held_back = true;
    } else {
      due.push_back(target);
      overwritten[object] = &target;
    }
  }
  auto closed = controller::FailClosed(client_, due, &*closable);
  if (!closed) {
    WarnRateLimited("failure-policy", closed.error().message());
    return closing;
  }
  const std::string secret_object =
      controller::SecretObjectName(config_.pass.secret.ns, config_.pass.secret.name);
  for (std::size_t i = 0; i < closed->patched.size(); ++i) {
    const std::string& object = closed->patched[i];
    metrics_.writes.Add({KindOf(object)});
    fights_.Wrote(object, kFailurePolicyField, "");
    log_(LogLevel::kInfo,
         "ready: set failurePolicy Fail on the entries of " + object + " that had Ignore");
    if (const auto fought = overwritten.find(object); fought != overwritten.end()) {
      fights_.Note({object,
                    {kFailurePolicyField},
                    "FailurePolicyOverwritten",
                    closed->patched_references[i],
                    fought->second->object});
    }
    // Folded like every Event about a target: a fight is not told once per write.
    RecordFoldedEvent(MakeEvent(
        closed->patched_references[i], "FailurePolicySet",
        "set failurePolicy Fail on the entries that had Ignore, as " + secret_object + " is ready",
        config_.instance, clock_.Now()));
  }
  return closing;
}

}  // namespace certctl::loop
