#include "certctl/controller/failure_policy.h"

#include <functional>

#include "certctl/inject/patch.h"

namespace certctl::controller {

bool HoldsFailurePolicy(const nlohmann::json& object) {
  const nlohmann::json::json_pointer annotations("/metadata/annotations");
  return object.contains(annotations) && object.at(annotations).is_object() &&
         object.at(annotations).contains(kHoldFailurePolicyAnnotation);
}

std::vector<std::string> FailurePolicyHolds(const std::vector<TargetObject>& targets) {
  std::vector<std::string> held;
  for (const TargetObject& target : targets) {
    const bool configuration = target.kind == inject::TargetKind::kValidatingWebhookConfiguration ||
                               target.kind == inject::TargetKind::kMutatingWebhookConfiguration;
    if (configuration && HoldsFailurePolicy(target.object)) {
      held.push_back(TargetObjectName(target.kind, target.name));
    }
  }
  return held;
}

Result<FailClosedOutcome> FailClosed(kube::Client& client, const std::vector<TargetObject>& targets,
                                     const ClosableEntries* closable) {
  FailClosedOutcome outcome;
  outcome.held = FailurePolicyHolds(targets);
  for (const TargetObject& target : targets) {
    const inject::TargetKind kind = target.kind;
    const std::string name = TargetObjectName(target.kind, target.name);
    std::function<bool(const std::string&)> only;
    if (closable != nullptr) {
      only = [closable, &name](const std::string& entry) {
        return closable->Closable(name, entry);
      };
    }
    // The patch is computed from the object as read, and again from each fresh read: a hold
    // on either means no patch.
    auto applied = PatchTarget(client, target, [kind, &only](const nlohmann::json& object) {
      if (HoldsFailurePolicy(object)) {
        return Result<std::optional<nlohmann::json>>(std::nullopt);
      }
      std::optional<nlohmann::json> patch = inject::FailClosedPatch(kind, object, only);
      // Guarded by the version read as well: a hold put on since then makes the patch fail
      // its test, and the object read again is left alone.
      const nlohmann::json::json_pointer version("/metadata/resourceVersion");
      if (patch && object.contains(version) && object.at(version).is_string()) {
        nlohmann::json pinned = {
            {"op", "test"}, {"path", version.to_string()}, {"value", object.at(version)}};
        patch->insert(patch->begin(), std::move(pinned));
      }
      return Result<std::optional<nlohmann::json>>(std::move(patch));
    });
    if (!applied) {
      return Fail(applied.error().Wrap("set failurePolicy Fail"));
    }
    if (!*applied) {
      continue;
    }
    for (const nlohmann::json& operation : **applied) {
      outcome.entries += operation["op"] == "replace" ? 1 : 0;
    }
    outcome.patched.push_back(TargetObjectName(target.kind, target.name));
    outcome.patched_references.push_back(ReferenceOf(target));
  }
  return outcome;
}

}  // namespace certctl::controller
