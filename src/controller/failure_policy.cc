#include "certctl/controller/failure_policy.h"

#include "certctl/inject/patch.h"

namespace certctl::controller {

Result<FailClosedOutcome> FailClosed(kube::Client& client,
                                     const std::vector<TargetObject>& targets) {
  FailClosedOutcome outcome;
  for (const TargetObject& target : targets) {
    const inject::TargetKind kind = target.kind;
    auto applied = PatchTarget(client, target, [kind](const nlohmann::json& object) {
      return Result<std::optional<nlohmann::json>>(inject::FailClosedPatch(kind, object));
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
