#include "certctl/controller/inject.h"

#include <algorithm>

#include "certctl/controller/targets.h"
#include "certctl/inject/patch.h"
#include "certctl/kube/object.h"
#include "certctl/util/duration.h"

namespace certctl::controller {
namespace {

std::string Describe(const std::vector<Finding>& missing) {
  std::string text;
  for (const Finding& finding : missing) {
    text += text.empty() ? "" : ", ";
    text += finding.object;
  }
  return text;
}

// Patches one object until it holds the bundle everywhere. Returns the number of caBundle
// fields changed (0 when it already held it).
Result<int> InjectInto(kube::Client& client, TargetObject target, const std::string& bundle_pem) {
  const inject::TargetKind kind = target.kind;
  auto applied = PatchTarget(client, std::move(target), [&](const kube::Json& object) {
    return inject::BundlePatch(kind, object, bundle_pem);
  });
  if (!applied) {
    return Fail(applied.error());
  }
  int changed = 0;
  if (*applied) {
    for (const auto& operation : **applied) {
      changed += operation["op"] == "add" ? 1 : 0;
    }
  }
  return changed;
}

}  // namespace

Result<InjectOutcome> InjectBundle(kube::Client& client, const TargetSelection& selection,
                                   const std::string& bundle_pem, const InjectOptions& options,
                                   const Clock& clock) {
  const TimePoint deadline =
      options.deadline.value_or(SaturatingAdd(clock.Now(), options.wait_for_targets));
  Result<ResolvedTargets> targets = ResolveTargets(client, selection);
  const TimePoint waiting_since = clock.Now();
  TimePoint next_note = waiting_since;
  for (TimePoint now = clock.Now();
       targets && !targets->missing.empty() && !options.leave_out_missing && now < deadline;
       now = clock.Now()) {
    if (options.on_waiting && now >= next_note) {
      options.on_waiting(
          "waiting for " + Describe(targets->missing) + " to appear (" +
          FormatDuration(std::chrono::duration_cast<std::chrono::seconds>(now - waiting_since)) +
          " so far, at most " +
          FormatDuration(std::chrono::ceil<std::chrono::seconds>(deadline - waiting_since)) + ")");
      next_note = now + options.waiting_note_interval;
    }
    clock.Sleep(std::min<std::chrono::milliseconds>(
        options.poll_interval, std::chrono::ceil<std::chrono::milliseconds>(deadline - now)));
    targets = ResolveTargets(client, selection);
  }
  if (!targets) {
    return Fail(targets.error());
  }
  if (!targets->missing.empty() && !options.leave_out_missing) {
    return Fail(ErrorCode::kNotFound, "still missing after waiting " +
                                          FormatDuration(options.wait_for_targets) + ": " +
                                          Describe(targets->missing));
  }

  // Every target must be able to carry a bundle before any is written, so a bad one does
  // not leave the others half-done.
  InjectOutcome outcome;
  for (const Finding& finding : targets->missing) {
    outcome.missing.push_back(finding.object);
  }
  for (const TargetObject& target : targets->found) {
    auto slots = inject::ReadBundleSlots(target.kind, target.object);
    if (!slots) {
      return Fail(slots.error());
    }
    ++outcome.objects;
    outcome.slots += static_cast<int>(slots->size());
  }
  for (TargetObject& target : targets->found) {
    const std::string object = TargetObjectName(target.kind, target.name);
    ObjectReference reference = ReferenceOf(target);
    outcome.targets.push_back(target);
    if (options.hold_back && options.hold_back(object, target)) {
      auto patch = inject::BundlePatch(target.kind, target.object, bundle_pem);
      if (!patch) {
        return Fail(patch.error());
      }
      if (*patch) {
        outcome.held_back.push_back(object);
        continue;
      }
    }
    auto changed = InjectInto(client, std::move(target), bundle_pem);
    if (!changed) {
      return Fail(changed.error());
    }
    if (*changed > 0) {
      ++outcome.patched_objects;
      outcome.patched_slots += *changed;
      outcome.patched.push_back(object);
      outcome.patched_references.push_back(std::move(reference));
    }
  }
  return outcome;
}

}  // namespace certctl::controller
