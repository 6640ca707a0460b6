// What the sidecar tells of its writes: log lines, metrics and Events; and the failurePolicy
// it writes once ready.
#include <algorithm>
#include <utility>

#include "certctl/controller/failure_policy.h"
#include "certctl/controller/secret.h"
#include "certctl/inject/targets.h"
#include "certctl/kube/managed_fields.h"
#include "certctl/loop/events.h"
#include "certctl/loop/sidecar.h"
#include "certctl/util/duration.h"
#include "certctl/util/safety_controls.h"

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
  for (const kube::Json& event : events) {
    if (auto recorded = RecordEvent(client_, event); !recorded) {
      WarnRateLimited("events", recorded.error().message());
    }
  }
  for (const controller::ObjectReference& target : report.patched_references) {
    RecordTargetEvent(MakeEvent(target, "CABundleInjected",
                                "injected the CA bundle of " + secret_object, config_.instance,
                                clock_.Now()));
  }
}

void Sidecar::RecordTargetEvent(kube::Json event) {
  if (auto admitted = target_events_.Admit(std::move(event), clock_.Monotonic()); admitted) {
    if (auto recorded = RecordEvent(client_, *admitted); !recorded) {
      WarnRateLimited("events", recorded.error().message());
    }
  }
}

void Sidecar::RecordDueTargetEvents() {
  if (!leading_) {
    target_events_.Clear();  // the leader tells what it does; this replica did nothing more
    return;
  }
  for (const kube::Json& event : target_events_.Due(clock_.Monotonic())) {
    if (auto recorded = RecordEvent(client_, event); !recorded) {
      WarnRateLimited("events", recorded.error().message());
    }
  }
}

namespace {

// Whether every caBundle of `target` is still `bundle` (what this replica last wrote there).
bool StillHolds(const controller::TargetObject& target, const std::string& bundle) {
  auto slots = inject::ReadBundleSlots(target.kind, target.object);
  return slots && std::all_of(slots->begin(), slots->end(), [&](const inject::BundleSlot& slot) {
           return slot.bundle == bundle;
         });
}

}  // namespace

bool Sidecar::HoldsBackRepair(const std::string& object, const controller::TargetObject& target) {
  if (SafetyRemoved("damping") || !damper_.HeldUntil(object, clock_.Monotonic())) {
    return false;
  }
  // Only a repair waits: a target still holding what this replica last wrote takes the next
  // bundle at once (a CA rotation's step must not wait out the memory of a fight).
  const auto last_written = written_bundles_.find(object);
  return last_written == written_bundles_.end() || !StillHolds(target, last_written->second);
}

void Sidecar::NoteRepairs(const PassReport& report) {
  const MonotonicTime now = clock_.Monotonic();
  for (std::size_t i = 0; i < report.patched.size(); ++i) {
    const std::string& object = report.patched[i];
    const auto read = std::find_if(
        report.targets.begin(), report.targets.end(), [&](const controller::TargetObject& target) {
          return controller::TargetObjectName(target.kind, target.name) == object;
        });
    const auto last_written = written_bundles_.find(object);
    // Overwritten: the target no longer held what this replica last put there. Its own
    // rotation writes (the target still holding the previous bundle) are no fight.
    const bool overwritten = last_written != written_bundles_.end() &&
                             read != report.targets.end() &&
                             !StillHolds(*read, last_written->second);
    written_bundles_[object] = report.injected_bundle;
    if (!overwritten) {
      continue;
    }
    metrics_.overwrites.Add({object});
    const int in_a_row = damper_.Repaired(object, now);
    if (!damper_.Contested(object)) {
      continue;
    }
    std::string who = "another writer";
    if (read != report.targets.end()) {
      for (const kube::FieldManager& manager : kube::ManagersOfField(read->object, "caBundle")) {
        if (manager.manager != kube::ClientOptions{}.field_manager && !manager.manager.empty()) {
          who += " (field manager \"" + manager.manager + "\")";
          break;
        }
      }
    }
    const auto held = damper_.HeldUntil(object, now);
    const std::string message = who + " keeps changing the caBundle of " + object + ": repaired " +
                                std::to_string(in_a_row) +
                                " times in a row; the next repair waits " +
                                FormatDuration(std::chrono::duration_cast<std::chrono::seconds>(
                                    held ? *held - now : std::chrono::seconds(0)));
    log_(LogLevel::kWarning, message);
    RecordTargetEvent(MakeEvent(report.patched_references[i], "CABundleOverwritten", message,
                                config_.instance, clock_.Now(), EventType::kWarning));
  }
  repair_due_at_ = report.held_back.empty() ? std::nullopt : damper_.NextRelease(now);
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

std::vector<std::string> Sidecar::FailurePolicyHolds() const {
  const std::lock_guard lock(state_mutex_);
  return failure_policy_held_;
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
