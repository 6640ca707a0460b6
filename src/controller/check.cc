#include "certctl/controller/check.h"

#include <set>

#include "certctl/controller/callable.h"
#include "certctl/controller/failure_policy.h"
#include "certctl/controller/secret.h"
#include "certctl/controller/targets.h"
#include "certctl/pki/certificate.h"

namespace certctl::controller {
namespace {

// Fingerprints of the CAs every caBundle must hold: the one that issued the leaf.
std::set<std::string> RequiredFingerprints(const pki::ValidationReport& validation) {
  std::set<std::string> required;
  if (validation.issuer_index && *validation.issuer_index < validation.ca.size()) {
    required.insert(validation.ca[*validation.issuer_index].sha256_fingerprint);
  }
  return required;
}

// Empty when `bundle` holds every required CA, else what is wrong with it.
std::string BundleProblem(const std::string& bundle, const std::set<std::string>& required) {
  if (bundle.empty()) {
    return "caBundle is empty";
  }
  auto certificates = pki::ParseCertificateBundle(bundle);
  if (!certificates) {
    return "caBundle does not parse: " + certificates.error().message();
  }
  std::set<std::string> present;
  for (const pki::Certificate& certificate : *certificates) {
    present.insert(certificate.Info().sha256_fingerprint);
  }
  for (const std::string& fingerprint : required) {
    if (present.count(fingerprint) == 0) {
      return "caBundle does not contain the CA that issued the server certificate (it holds " +
             std::to_string(certificates->size()) + " other certificate(s))";
    }
  }
  return "";
}

}  // namespace

std::vector<Finding> CheckReport::AllFindings() const {
  std::vector<Finding> findings = other_findings;
  const std::vector<Finding> validation_findings = validation.AllFindings();
  findings.insert(findings.begin(), validation_findings.begin(), validation_findings.end());
  findings.insert(findings.end(), call_findings.begin(), call_findings.end());
  return findings;
}

Result<CheckReport> CheckSecret(kube::Client& client, std::string_view ns, std::string_view name,
                                const pki::ValidationPolicy& policy, TimePoint now,
                                std::chrono::seconds ca_overlap) {
  CheckReport report;
  const std::string secret_object = SecretObjectName(ns, name);
  report.source = "secret " + std::string(ns) + "/" + std::string(name);
  auto stored = ReadStoredSecret(client, ns, name, policy, ca_overlap, now);
  if (!stored) {
    return Fail(stored.error());
  }
  if (!stored->has_value()) {
    // Said with the command that makes it, since a first check usually comes before any.
    report.other_findings.push_back(
        {FindingCode::kMissing, secret_object,
         "does not exist; certctl creates it: certctl job --phase secret -n " + std::string(ns) +
             " --secret " + std::string(name) +
             " --service SERVICE (the chart's hook runs it), or certctl run beside the webhook"});
    return report;
  }
  report.other_findings = std::move((*stored)->pair.findings);
  // Nothing fails because of them yet, but the Secret is not as certctl keeps it: told, so
  // that a hand edit that certctl will undo does not pass for healthy.
  for (const RotationProblem& problem : (*stored)->rotation_problems) {
    report.other_findings.push_back(
        {FindingCode::kRotationStateInvalid, secret_object, problem.message});
  }
  if ((*stored)->conflict) {
    report.other_findings.push_back(
        {FindingCode::kConflictingConfiguration, secret_object, *(*stored)->conflict});
  }
  report.validation = std::move((*stored)->validation);
  return report;
}

Status CheckTargets(kube::Client& client, const TargetSelection& selection, CheckReport& report) {
  auto targets = ResolveTargets(client, selection);
  if (!targets) {
    return Fail(targets.error());
  }
  // Without the CA that issued the leaf there is nothing to compare against (the source's
  // findings say why): only an empty or unreadable caBundle is wrong whatever the Secret holds.
  const bool have_ca = report.validation.issuer_index.has_value() &&
                       *report.validation.issuer_index < report.validation.ca.size();
  const std::set<std::string> required = RequiredFingerprints(report.validation);
  for (const TargetObject& target : targets->found) {
    const std::string kind(inject::TargetKindName(target.kind));
    const std::string& name = target.name;
    const std::string object = TargetObjectName(target.kind, name);
    auto slots = inject::ReadBundleSlots(target.kind, target.object);
    if (!slots) {
      report.other_findings.push_back(
          {FindingCode::kCaBundleMismatch, object, slots.error().message()});
      report.targets.push_back({kind, name, "", false, "", "", {}, false});
      continue;
    }
    const pki::CertificateInfo* leaf = report.validation.leaf ? &*report.validation.leaf : nullptr;
    std::vector<CallVerdict> calls = JudgeCalls(target, leaf);
    for (std::size_t i = 0; i < slots->size(); ++i) {
      const inject::BundleSlot& slot = (*slots)[i];
      const std::string problem =
          have_ca ? BundleProblem(slot.bundle, required) : BundleProblem(slot.bundle, {});
      if (!problem.empty()) {
        report.other_findings.push_back(
            {FindingCode::kCaBundleMismatch,
             slot.webhook.empty() ? object : object + " webhook " + slot.webhook, problem});
      }
      TargetStatus status{kind,        name, slot.webhook, have_ca && problem.empty(),
                          slot.bundle, "",   {},           false};
      // The endpoints line up with the slots: both are read in document order.
      if (i < calls.size()) {
        CallVerdict& call = calls[i];
        status.calls = call.endpoint.problem.empty() ? call.endpoint.Calls() : "";
        status.endpoint = std::move(call.endpoint);
        if (call.finding) {
          status.ok = false;
          report.call_findings.push_back(std::move(*call.finding));
        }
      }
      report.targets.push_back(std::move(status));
    }
  }
  report.other_findings.insert(report.other_findings.end(), targets->missing.begin(),
                               targets->missing.end());
  for (const std::string& object : FailurePolicyHolds(targets->found)) {
    report.notes.push_back(object + " carries " + kHoldFailurePolicyAnnotation +
                           ": certctl changes no failurePolicy in it while it does");
  }
  return {};
}

}  // namespace certctl::controller
