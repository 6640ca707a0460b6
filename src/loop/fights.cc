#include "certctl/loop/fights.h"

#include <algorithm>
#include <array>
#include <map>

#include "certctl/controller/failure_policy.h"
#include "certctl/controller/secret.h"
#include "certctl/inject/patch.h"
#include "certctl/inject/targets.h"
#include "certctl/kube/managed_fields.h"
#include "certctl/loop/events.h"
#include "certctl/util/duration.h"
#include "certctl/util/safety_controls.h"
#include "certctl/util/text.h"

namespace certctl::loop {
namespace {

// The keys of the Secret another writer may fight over.
constexpr std::array<std::string_view, 4> kSecretKeys = {"tls.crt", "tls.key", "ca.crt", "ca.key"};

// What the caBundles of `target` hold, as one value for the damper: the bundle when every
// slot holds the same one.
std::string HeldBundle(const controller::TargetObject& target) {
  auto slots = inject::ReadBundleSlots(target.kind, target.object);
  std::string held;
  if (!slots || slots->empty()) {
    return held;
  }
  held = slots->front().bundle;
  for (const inject::BundleSlot& slot : *slots) {
    if (slot.bundle != held) {
      held += "\n--\n" + slot.bundle;
    }
  }
  return held;
}

std::string SecretValue(const kube::Json& secret, std::string_view key) {
  const nlohmann::json::json_pointer pointer("/data/" + std::string(key));
  return secret.contains(pointer) && secret.at(pointer).is_string()
             ? secret.at(pointer).get<std::string>()
             : "";
}

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

std::string OtherWriter(const kube::Json& object, std::string_view field) {
  for (const kube::FieldManager& manager : kube::ManagersOfField(object, field)) {
    if (!manager.manager.empty() && manager.manager != kube::ClientOptions{}.field_manager) {
      return manager.manager;
    }
  }
  return "";
}

Fights::Fights(const Clock& clock, Telling telling, RepairPolicy policy)
    : clock_(clock), telling_(std::move(telling)), damper_(policy) {}

void Fights::Note(const Overwrite& overwrite) {
  const MonotonicTime now = clock_.Monotonic();
  if (telling_.overwrites != nullptr) {
    for (const std::string& field : overwrite.fields) {
      telling_.overwrites->Add({overwrite.object, field});
    }
  }
  const int in_a_row = damper_.Repaired(overwrite.object, now);
  if (!damper_.Contested(overwrite.object)) {
    return;
  }
  std::string who = "another writer";
  for (const std::string& field : overwrite.fields) {
    if (const std::string writer = OtherWriter(overwrite.as_read, field); !writer.empty()) {
      who += " (field manager \"" + writer + "\")";
      break;
    }
  }
  const std::string fight =
      who + " keeps changing the " + JoinWithCommas(overwrite.fields) + " of " + overwrite.object;
  const auto held = damper_.HeldUntil(overwrite.object, now);
  if (telling_.log) {
    telling_.log(LogLevel::kWarning,
                 fight + ": repaired " + std::to_string(in_a_row) +
                     " times in a row; the next repair waits " +
                     FormatDuration(std::chrono::duration_cast<std::chrono::seconds>(
                         held ? *held - now : std::chrono::seconds(0))));
  }
  // The Event's words stay the same while the fight lasts, so its repeats fold into one
  // series; the changing figures are the log's and certctl_overwrites_total's.
  if (telling_.event) {
    telling_.event(MakeEvent(overwrite.reference, overwrite.reason,
                             fight + "; certctl repairs it, waiting longer each time",
                             telling_.instance, clock_.Now(), EventType::kWarning));
  }
}

bool Fights::Damps(const std::string& object, const std::string& writer) {
  const MonotonicTime now = clock_.Monotonic();
  damper_.Sighted(object, writer, now);
  return !SafetyRemoved("damping") && damper_.HoldsBack(object, now);
}

bool Fights::HoldsBackTarget(const std::string& object, const controller::TargetObject& target) {
  if (!damper_.Overwritten(object, kCaBundleField, HeldBundle(target))) {
    return false;
  }
  return Damps(object, OtherWriter(target.object, kCaBundleField));
}

void Fights::BeginPass(const std::string& object) { pending_.erase(object); }

bool Fights::HoldsBackSecret(const std::string& object, const kube::Json& secret) {
  std::vector<std::string> changed;
  for (const std::string_view key : kSecretKeys) {
    if (damper_.Overwritten(object, std::string(key), SecretValue(secret, key))) {
      changed.emplace_back(key);
    }
  }
  if (changed.empty()) {
    return false;  // what certctl wrote, or never wrote: a renewal, a rotation step
  }
  if (Damps(object, OtherWriter(secret, changed.front()))) {
    return true;
  }
  // Told once the pass has written the repair.
  pending_[object] = {object, std::move(changed), "SecretOverwritten", {}, secret};
  return false;
}

void Fights::NoteRepairs(const PassReport& report, const std::string& ns, const std::string& name) {
  for (std::size_t i = 0; i < report.patched.size(); ++i) {
    const std::string& object = report.patched[i];
    const auto read = std::find_if(
        report.targets.begin(), report.targets.end(), [&](const controller::TargetObject& target) {
          return controller::TargetObjectName(target.kind, target.name) == object;
        });
    // Overwritten: the target no longer held what certctl last put there. Its own rotation
    // writes (the target still holding the previous bundle) are no fight.
    const bool overwritten = read != report.targets.end() &&
                             damper_.Overwritten(object, kCaBundleField, HeldBundle(*read));
    damper_.Wrote(object, kCaBundleField, report.injected_bundle);
    if (overwritten) {
      Note({object,
            {kCaBundleField},
            "CABundleOverwritten",
            report.patched_references[i],
            read->object});
    }
  }
  const std::string secret_object = controller::SecretObjectName(ns, name);
  if (auto pending = pending_.find(secret_object);
      pending != pending_.end() && !report.secret_changes.empty()) {
    pending->second.reference = {"v1", "Secret", ns, name, report.secret_changes.back().uid};
    Note(pending->second);
  }
  pending_.erase(secret_object);
  for (const auto& [key, value] : report.secret_data) {
    damper_.Wrote(secret_object, key, value);
  }
}

Fights::Closing Fights::CloseFailurePolicies(kube::Client& client,
                                             const std::vector<controller::TargetObject>& targets,
                                             const std::string& secret_object) {
  // Readiness already holds every called name covered; the Services and their endpoints are
  // judged here, and only when some entry still has Ignore.
  Closing closing;
  auto closable = controller::JudgeClosable(client, targets, nullptr);
  if (!closable) {
    closing.failure = closable.error().message();
    return closing;
  }
  if (closable->kept > 0) {
    std::string why = JoinFindings(closable->findings);
    for (const std::string& note : closable->notes) {
      why += (why.empty() ? "" : "; ") + note;
    }
    closing.kept_because = "kept failurePolicy Ignore on " + std::to_string(closable->kept) +
                           (closable->kept == 1 ? " entry" : " entries") +
                           " the API server cannot call: " + (why.empty() ? "kept" : why);
  }
  // An entry set back to Ignore after certctl closed it is a repair like any other: it waits
  // while the damper holds the configuration.
  std::vector<controller::TargetObject> due;
  std::map<std::string, const controller::TargetObject*> overwritten;
  for (const controller::TargetObject& target : targets) {
    const std::string object = controller::TargetObjectName(target.kind, target.name);
    if (!damper_.Overwritten(object, kFailurePolicyField, OpenEntries(target, *closable))) {
      due.push_back(target);
      continue;
    }
    if (Damps(object, OtherWriter(target.object, kFailurePolicyField))) {
      closing.held_back = true;
    } else {
      due.push_back(target);
      overwritten[object] = &target;
    }
  }
  auto closed = controller::FailClosed(client, due, &*closable);
  if (!closed) {
    closing.failure = closed.error().message();
    return closing;
  }
  for (std::size_t i = 0; i < closed->patched.size(); ++i) {
    const std::string& object = closed->patched[i];
    closing.patched.push_back(object);
    damper_.Wrote(object, kFailurePolicyField, "");
    if (telling_.log) {
      telling_.log(LogLevel::kInfo, "ready: set failurePolicy Fail on the entries of " + object +
                                        " that had Ignore");
    }
    if (const auto fought = overwritten.find(object); fought != overwritten.end()) {
      Note({object,
            {kFailurePolicyField},
            "FailurePolicyOverwritten",
            closed->patched_references[i],
            fought->second->object});
    }
    // Folded like every Event about a target: a fight is not told once per write.
    if (telling_.event) {
      telling_.event(MakeEvent(closed->patched_references[i], "FailurePolicySet",
                               "set failurePolicy Fail on the entries that had Ignore, as " +
                                   secret_object + " is ready",
                               telling_.instance, clock_.Now()));
    }
  }
  return closing;
}

}  // namespace certctl::loop
