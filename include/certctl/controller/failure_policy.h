#pragma once

#include <string>
#include <vector>

#include "certctl/controller/targets.h"
#include "certctl/kube/client.h"
#include "certctl/util/result.h"

namespace certctl::controller {

// `--failure-policy-once-ready Fail` (SPEC 4a): a chart ships failurePolicy Ignore, so the
// cluster does not deadlock while its webhook has no certificate yet, and certctl makes it
// fail closed once the webhook is known to be callable.
struct FailClosedOutcome {
  int entries = 0;                                  // webhook entries turned to Fail
  std::vector<std::string> patched;                 // "validatingwebhookconfiguration/x", ...
  std::vector<ObjectReference> patched_references;  // the same objects, for Events
};

// Sets failurePolicy Fail on every entry with Ignore of the webhook configurations among
// `targets` (as last read), with JSON patches guarded by `test`; an object that changed
// underneath is read again. CRDs and APIServices have no failurePolicy and are passed over.
// Zero writes when no entry has Ignore; never turns Fail into Ignore.
Result<FailClosedOutcome> FailClosed(kube::Client& client,
                                     const std::vector<TargetObject>& targets);

}  // namespace certctl::controller
