// What a webhook entry's rules and selectors say about the requests it intercepts, for the
// audit's self-deadlock and timeouts-add-up findings.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "certctl/audit/audit.h"
#include "certctl/kube/object.h"

namespace certctl::audit::internal {

// The API server's defaults for admissionregistration.k8s.io/v1.
constexpr int kDefaultTimeoutSeconds = 10;
// What one request may wait on webhooks before the findings call it too long.
constexpr int kTimeoutBudgetSeconds = 30;

struct RuleSet {
  std::vector<std::string> operations;  // "*" expanded when matching
  std::vector<std::string> groups;
  std::vector<std::string> resources;
};

// One webhook entry, as far as the requests it waits on go.
struct AdmissionHook {
  std::string object;  // "mutatingwebhookconfiguration/x"
  std::string entry;   // "webhooks[0] (m.example.com)"
  bool mutating = false;
  int timeout_seconds = kDefaultTimeoutSeconds;
  std::vector<RuleSet> rules;
};

// The rules of a webhook entry; fields the API server would have refused are read as absent.
std::vector<RuleSet> ReadRules(const kube::Json& webhook);

// Whether the entry certainly intercepts the creation of Pods in namespace `ns`: its rules
// match CREATE of core/v1 pods, its namespaceSelector matches the namespace by the one label
// every namespace carries (kubernetes.io/metadata.name), and no objectSelector or
// matchConditions could let its own pods through.
bool InterceptsPodCreation(const kube::Json& webhook, std::string_view ns);

// For each operation on each resource the rules name, the time a request may wait on the
// webhooks that match it: mutating ones are called one after another, validating ones at
// once, so the sum of the first and the longest of the second. One warning per set of
// webhooks whose wait passes kTimeoutBudgetSeconds, naming the requests and the webhooks.
std::vector<AuditFinding> TimeoutsAddUp(const std::vector<AdmissionHook>& hooks);

}  // namespace certctl::audit::internal
