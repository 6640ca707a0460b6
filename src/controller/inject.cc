#include "certctl/controller/inject.h"

#include <algorithm>

#include "certctl/controller/targets.h"
#include "certctl/inject/patch.h"
#include "certctl/kube/object.h"
#include "certctl/util/duration.h"

namespace certctl::controller {
namespace {

constexpr int kMaxAttempts = 5;

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
  const kube::ResourceType& type = ResourceFor(target.kind);
  const std::string object = TargetObjectName(target.kind, target.name);
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    auto patch = inject::BundlePatch(target.kind, target.object, bundle_pem);
    if (!patch) {
      return Fail(patch.error());
    }
    if (!*patch) {
      return 0;
    }
    int changed = 0;
    for (const auto& operation : **patch) {
      changed += operation["op"] == "add" ? 1 : 0;
    }
    auto patched = client.Patch(type, "", target.name, kube::PatchType::kJsonPatch, **patch);
    if (patched) {
      return changed;
    }
    // A failed `test` (the entries moved) is 422 Invalid; both it and a conflict mean the
    // object changed underneath: read it again and recompute.
    const ErrorCode code = patched.error().code();
    if (code != ErrorCode::kInvalidArgument && code != ErrorCode::kConflict) {
      return Fail(patched.error().Wrap("patch " + object));
    }
    auto fresh = client.Get(type, "", target.name);
    if (!fresh) {
      return Fail(fresh.error().Wrap("get " + object));
    }
    if (!fresh->has_value()) {
      return Fail(ErrorCode::kNotFound, object + " was deleted while its caBundle was written");
    }
    // Unchanged, the object cannot have failed the patch's `test`: the server refused the
    // patch itself (a validating admission policy, say), and trying again would not help.
    const auto fresh_version = kube::ResourceVersion(**fresh, object);
    const auto read_version = kube::ResourceVersion(target.object, object);
    if (code == ErrorCode::kInvalidArgument && fresh_version && read_version &&
        !fresh_version->empty() && *fresh_version == *read_version) {
      return Fail(patched.error().Wrap("patch " + object));
    }
    target.object = std::move(**fresh);
  }
  return Fail(ErrorCode::kConflict, object + " kept changing under us; gave up after " +
                                        std::to_string(kMaxAttempts) + " attempts");
}

}  // namespace

Result<InjectOutcome> InjectBundle(kube::Client& client, const TargetSelection& selection,
                                   const std::string& bundle_pem, const InjectOptions& options,
                                   const Clock& clock) {
  const TimePoint deadline =
      options.deadline.value_or(SaturatingAdd(clock.Now(), options.wait_for_targets));
  Result<ResolvedTargets> targets = ResolveTargets(client, selection);
  for (TimePoint now = clock.Now();
       targets && !targets->missing.empty() && !options.leave_out_missing && now < deadline;
       now = clock.Now()) {
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
    const kube::ResourceType& type = ResourceFor(target.kind);
    ObjectReference reference{type.group.empty()
                                  ? std::string(type.version)
                                  : std::string(type.group) + "/" + std::string(type.version),
                              std::string(type.kind), "", target.name,
                              kube::OptionalString(target.object, "/metadata/uid", object)
                                  .value_or(std::nullopt)
                                  .value_or("")};
    outcome.targets.push_back(target);
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
