#pragma once

#include <string>
#include <vector>

#include "certctl/kube/client.h"
#include "certctl/pki/validate.h"
#include "certctl/util/clock.h"
#include "certctl/util/finding.h"
#include "certctl/util/result.h"

namespace certctl::controller {

// The caBundle holders certctl looks after (webhook configurations, CRD conversion webhooks,
// APIServices), by name or by label.
struct TargetSelection {
  std::vector<std::string> validating_webhooks;
  std::vector<std::string> mutating_webhooks;
  std::vector<std::string> crds;
  std::vector<std::string> api_services;
  std::string webhook_selector;  // label selector over both webhook configuration kinds

  bool empty() const;
};

// One caBundle field: a webhook entry, a CRD conversion webhook or an APIService.
struct TargetStatus {
  std::string kind;  // "ValidatingWebhookConfiguration", ...
  std::string name;
  std::string webhook;  // entry name inside a webhook configuration, else empty
  bool ok = false;
  std::string bundle;  // the caBundle as read (decoded PEM); empty when absent or unreadable
};

// The outcome of `certctl check`, whatever the source.
struct CheckReport {
  std::string source;  // "dir /etc/certs", "files a b c", "secret ns/name"
  pki::ValidationReport validation;
  std::vector<TargetStatus> targets;
  std::vector<Finding> other_findings;  // about the source object or the targets

  std::vector<Finding> AllFindings() const;
  bool ok() const { return AllFindings().empty(); }
};

// Reads the Secret (one GET) and validates what it holds. An API failure other than "not
// found" (unreachable, unauthorized, forbidden) is an error; absence is a finding.
Result<CheckReport> CheckSecret(kube::Client& client, std::string_view ns, std::string_view name,
                                const pki::ValidationPolicy& policy, TimePoint now);

// Reads every selected target (GET and LIST only) and adds to `report` a status per caBundle
// and a finding for each target that is missing or lacks the CA that issued the leaf of
// report.validation.
Status CheckTargets(kube::Client& client, const TargetSelection& selection, CheckReport& report);

}  // namespace certctl::controller
