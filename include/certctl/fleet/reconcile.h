// One reconcile of one Secret the annotations name, the unit of work of `certctl controller`.
// A Secret a Service asks for is handled by `run`'s own pass (loop::Reconcile) over that
// Secret and every target that injects from it: the same planning, rotation steps and
// findings. A Secret only injected from (cert-manager's, another certctl's, a team's own) is
// read, never written, and its ca.crt put into those targets.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "certctl/controller/inject.h"
#include "certctl/controller/issuer.h"
#include "certctl/controller/targets.h"
#include "certctl/fleet/annotation_index.h"
#include "certctl/kube/client.h"
#include "certctl/loop/pass.h"
#include "certctl/pki/key.h"
#include "certctl/pki/names.h"
#include "certctl/pki/validate.h"
#include "certctl/util/clock.h"
#include "certctl/util/result.h"

namespace certctl::fleet {

// On every Secret the controller issues: the Service it is for. The controller watches the
// Secrets with this label, not every Secret of the cluster.
inline constexpr char kServingCertForLabel[] = "certctl.io/serving-cert-for";

// The controller's flags that shape every Secret it issues.
struct IssueSettings {
  pki::KeyType key_type = pki::KeyType::kEcdsaP256;
  std::chrono::seconds ca_validity{std::chrono::hours(24 * 365 * 10)};
  std::chrono::seconds cert_validity{std::chrono::hours(24 * 365 * 10)};
  std::chrono::seconds renew_before = pki::kDefaultRenewBefore;
  std::chrono::seconds ca_overlap{controller::kDefaultCaOverlap};
  std::string cluster_domain = pki::kDefaultClusterDomain;
  std::string ca_organization;
  std::optional<controller::Issuer> issuer;  // recorded with every pair issued
};

// What the Secret `request` asks for, as run would keep it with `settings`: the Service's
// names (section 3) and the annotated ones, a CA named "<service>-ca".
controller::SecretSpec SpecFor(const CertificateRequest& request, const IssueSettings& settings);

// Something an annotation asks for that cannot be done, about the object that asked: for a
// Warning Event on it and the log.
// The Event reference of the target that made `request`.
controller::ObjectReference TargetReference(const InjectionRequest& request);

struct Problem {
  controller::ObjectReference about;
  std::string reason;  // the Event's reason: "SecretNotManaged", "InjectionSourceMissing", ...
  std::string message;
};

struct SecretReconcile {
  std::string secret;  // "ns/name"
  // A Secret a Service asks for: run's pass over it and the targets that inject from it.
  std::optional<loop::PassReport> pass;
  // A Secret only injected from: what its ca.crt did to those targets.
  std::optional<controller::InjectOutcome> injected;
  std::vector<Problem> problems;
};

// Reconciles the Secret `requests` is about, as the annotations ask. Nothing happens to a
// Secret no annotation names (not even a read). Targets that ask with cert-manager's annotation get
// a CA only from a Secret that allows direct injection, as cainjector requires. API failures a
// retry may fix are errors (the queue backs off); what only a person can fix is a Problem.
// `hooks` carries the caller's memory into run's pass (PassConfig::hold_back,
// secret_hold_back, bundle_held_since); its Secret and targets are filled in here.
Result<SecretReconcile> ReconcileSecret(kube::Client& client, const SecretRequests& requests,
                                        const IssueSettings& settings, const Clock& clock,
                                        const loop::PassConfig& hooks = {});

}  // namespace certctl::fleet
