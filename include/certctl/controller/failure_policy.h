#pragma once

#include <string>
#include <vector>

#include "certctl/controller/callable.h"
#include "certctl/controller/targets.h"
#include "certctl/kube/client.h"
#include "certctl/util/result.h"

namespace certctl::controller {

// Break-glass (SPEC 4a): while a webhook configuration carries this annotation (any value),
// certctl changes no failurePolicy in it, so an operator's Ignore during an incident sticks.
inline constexpr char kHoldFailurePolicyAnnotation[] = "certctl.io/hold-failure-policy";

// Whether `object` (a webhook configuration) carries kHoldFailurePolicyAnnotation.
bool HoldsFailurePolicy(const nlohmann::json& object);

// "validatingwebhookconfiguration/x" of every webhook configuration among `targets` that
// carries the hold.
std::vector<std::string> FailurePolicyHolds(const std::vector<TargetObject>& targets);

// `--failure-policy-once-ready Fail` (SPEC 4a): a chart ships failurePolicy Ignore, so the
// cluster does not deadlock while its webhook has no certificate yet, and certctl makes it
// fail closed once the webhook is known to be callable.
struct FailClosedOutcome {
  int entries = 0;                                  // webhook entries turned to Fail
  std::vector<std::string> patched;                 // "validatingwebhookconfiguration/x", ...
  std::vector<ObjectReference> patched_references;  // the same objects, for Events
  std::vector<std::string> held;  // configurations left as they are: they carry the hold
};

// Sets failurePolicy Fail on every entry with Ignore of the webhook configurations among
// `targets` (as last read), with JSON patches guarded by `test`; an object that changed
// underneath is read again. CRDs and APIServices have no failurePolicy and are passed over.
// Zero writes when no entry has Ignore; never turns Fail into Ignore. A configuration that
// carries the hold (as read, or as read again for the patch) is left as it is. With
// `closable`, only the entries it names are closed (SPEC 4a: those the API server can call).
Result<FailClosedOutcome> FailClosed(kube::Client& client, const std::vector<TargetObject>& targets,
                                     const ClosableEntries* closable = nullptr);

}  // namespace certctl::controller
