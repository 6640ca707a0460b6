#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "certctl/controller/check.h"
#include "certctl/controller/ensure_secret.h"
#include "certctl/inject/targets.h"
#include "certctl/kube/client.h"
#include "certctl/util/finding.h"
#include "certctl/util/result.h"

namespace certctl::controller {

const kube::ResourceType& ResourceFor(inject::TargetKind kind);

// "validatingwebhookconfiguration/name", as kubectl names objects.
std::string TargetObjectName(inject::TargetKind kind, std::string_view name);

struct TargetObject {
  inject::TargetKind kind;
  std::string name;  // as asked for, or as listed (a string, checked)
  nlohmann::json object;
};

// An object certctl wrote, named the way an Event's involvedObject names it.
struct ObjectReference {
  std::string api_version;  // "admissionregistration.k8s.io/v1"
  std::string kind;         // "ValidatingWebhookConfiguration"
  std::string ns;           // empty for cluster-scoped objects
  std::string name;
  std::string uid;  // empty when the server sent none
};

ObjectReference ReferenceOf(const TargetObject& target);

// Computes a JSON patch from the object as read; an empty optional: nothing to write.
using PatchMaker = std::function<Result<std::optional<nlohmann::json>>(const nlohmann::json&)>;

// Patches `target` with what `make_patch` computes from it until it needs nothing: when the
// object changed underneath (409, or 422 from a failed `test`) it is read again and the
// patch recomputed, at most 5 times. Returns the patch the server took, or an empty optional
// when there was nothing to write. A 422 on an unchanged object (a policy refusing the
// write) is an error at once.
Result<std::optional<nlohmann::json>> PatchTarget(kube::Client& client, TargetObject target,
                                                  const PatchMaker& make_patch);

struct ResolvedTargets {
  std::vector<TargetObject> found;  // selection order; selector matches after named ones
  std::vector<Finding> missing;     // target-missing: named objects absent, selector unmatched
};

// Reads every selected target. Absence is reported in `missing`; API failures, and listed
// objects without a proper metadata.name, are errors.
Result<ResolvedTargets> ResolveTargets(kube::Client& client, const TargetSelection& selection);

// The Validating, then the Mutating, webhook configurations a --webhook-selector selects: one
// LIST of each kind. Listed objects without a proper metadata.name are errors.
Result<std::vector<TargetObject>> ListSelectedWebhookConfigurations(kube::Client& client,
                                                                    std::string_view selector);

// The caBundles the selected targets hold now, each named by its object: where the CA of a
// damaged ca.crt may still be found (EnsureSecret's known bundles). What cannot be read is
// left out: this only ever saves a CA, it decides nothing else.
std::vector<KnownBundle> BundlesOfTargets(kube::Client& client, const TargetSelection& selection);

// The names the API server verifies when it calls the selected targets now (webhook entries,
// conversion webhooks, APIServices), without repeats. As with the bundles, what cannot be
// read is left out.
std::vector<std::string> CalledHostsOfTargets(kube::Client& client,
                                              const TargetSelection& selection);

}  // namespace certctl::controller
