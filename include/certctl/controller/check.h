#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "certctl/controller/rotation_check.h"
#include "certctl/inject/called_names.h"
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
  bool ok = false;      // the bundle, the name called and (when read) the Service all hold
  std::string bundle;   // the caBundle as read (decoded PEM); empty when absent or unreadable
  std::string calls;    // what the API server calls: "hook.infra.svc" or the URL; empty when
                        // the entry names nothing callable
  // Where the API server's call lands, and how the entry is named in findings.
  inject::CalledEndpoint endpoint;
  // The Service it calls could not be read (the credentials were refused): not known to exist.
  bool service_unread = false;
};

// The outcome of `certctl check`, whatever the source.
struct CheckReport {
  std::string source;  // "dir /etc/certs", "files a b c", "secret ns/name"
  pki::ValidationReport validation;
  std::vector<TargetStatus> targets;
  std::vector<Finding> other_findings;  // about the source object or the targets' caBundles
  // What the API server would find calling the targets (SPEC 4a): names not covered, the
  // Services they call.
  std::vector<Finding> call_findings;
  // What the report could not judge, said so that silence is not read as a pass: no SAN
  // checked, a Service the credentials may not read.
  std::vector<std::string> notes;

  std::vector<Finding> AllFindings() const;
  bool ok() const { return AllFindings().empty(); }
};

// Reads the Secret (one GET) and validates what it holds. An API failure other than "not
// found" (unreachable, unauthorized, forbidden) is an error; absence is a finding. A rotation
// annotation of a managed Secret that certctl would ignore or clamp (judged with
// `ca_overlap`) is a rotation-state-invalid finding.
Result<CheckReport> CheckSecret(kube::Client& client, std::string_view ns, std::string_view name,
                                const pki::ValidationPolicy& policy, TimePoint now,
                                std::chrono::seconds ca_overlap = kDefaultCaOverlap);

// Reads every selected target (GET and LIST only) and adds to `report` a status per caBundle,
// a finding for each target that is missing or lacks the CA that issued the leaf of
// report.validation, and a call finding for each entry whose called name the leaf does not
// cover or that names nothing callable.
Status CheckTargets(kube::Client& client, const TargetSelection& selection, CheckReport& report);

}  // namespace certctl::controller
