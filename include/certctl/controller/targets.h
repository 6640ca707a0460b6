#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "certctl/controller/check.h"
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

struct ResolvedTargets {
  std::vector<TargetObject> found;  // selection order; selector matches after named ones
  std::vector<Finding> missing;     // target-missing: named objects absent, selector unmatched
};

// Reads every selected target. Absence is reported in `missing`; API failures, and listed
// objects without a proper metadata.name, are errors.
Result<ResolvedTargets> ResolveTargets(kube::Client& client, const TargetSelection& selection);

}  // namespace certctl::controller
