// What a reconcile writes into a Secret, decided apart from the API: issuing the CA and the
// leaf, the rotation steps and the repairs. Internal to the controller module; ensure_secret.cc
// takes these plans to the API server.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "certctl/controller/ensure_secret.h"
#include "certctl/controller/rotation_check.h"
#include "certctl/controller/secret.h"
#include "certctl/pki/certificate.h"
#include "certctl/pki/key.h"
#include "certctl/pki/validate.h"
#include "certctl/util/result.h"

namespace certctl::controller {

// The four data keys of a managed Secret, as PEM.
struct PairPem {
  std::string ca_crt;
  std::string ca_key;
  std::string tls_crt;
  std::string tls_key;
};

// What one reconcile writes into a managed Secret: new data (or the data as stored), the
// rotation annotations, and why.
struct Plan {
  SecretAction action = SecretAction::kNone;
  PairPem pem;
  RotationState rotation;
  std::string reason;
  bool lenient = false;  // the leaf stays the one a CA on its way out issued
};

// A leaf for the Secret's identity from `ca`: certificate and key PEM.
Result<std::pair<std::string, std::string>> IssueLeafPem(const SecretSpec& spec,
                                                         const pki::KeyPair& ca, TimePoint now);

// A new CA and a leaf from it.
Result<PairPem> IssueAll(const SecretSpec& spec, TimePoint now);

// Writes the four data keys, keeping any others.
void SetData(nlohmann::json& secret, const PairPem& pem);

// The managed-by label that makes the Secret certctl's.
void MarkManaged(nlohmann::json& secret);

// A kubernetes.io/tls Secret holding `pem`, labelled as certctl's.
nlohmann::json NewSecret(const SecretSpec& spec, const PairPem& pem);

// What was just issued must pass the same validation the next run will apply, or every run
// would replace it again (a validity shorter than renew-before, a clock far off): such a pair
// is never written.
Result<pki::ValidationReport> ValidateIssued(const PairPem& pem,
                                             const pki::ValidationPolicy& policy, TimePoint now,
                                             const std::string& object);

// The stored CA, when ca.key parses and belongs to a CA certificate of ca.crt.
std::optional<pki::KeyPair> StoredCa(const pki::PairSource& source);

// The certificates of ca.crt in order; none when it does not parse.
std::vector<pki::Certificate> BundleOf(const pki::PairSource& source);

// ca.crt rebuilt around ca.key's own CA certificate when ca.crt lost it (see EnsureSecret):
// the bundle to store and where it was found. None when ca.crt still holds it, ca.key does not
// parse, or no valid CA certificate of ca.key's is found anywhere.
struct RecoveredBundle {
  std::string pem;
  std::string found_in;
};
std::optional<RecoveredBundle> RecoverCaBundle(const pki::PairSource& source,
                                               const std::string& raw_ca_crt,
                                               const KnownBundles& known_bundles, TimePoint now);

// The data as stored, for a write that keeps it.
PairPem StoredPem(const pki::PairSource& source);

// Decides what a managed (or adopted) Secret needs. No write: action kNone.
Result<Plan> PlanManaged(const SecretSpec& spec, const SecretPair& pair,
                         const pki::ValidationReport& validation, const RotationState& state,
                         TimePoint now);

// The Secret as stored, with what did not belong removed (`source` is already pruned) and the
// rotation annotations as judged.
Plan Repair(const pki::PairSource& source, const RotationState& state, std::string reason);

// Why a repair writes: the certificates pruned from ca.crt and the annotations judged wrong.
std::string DescribeRepair(const std::optional<PrunedBundle>& pruned,
                           const std::vector<RotationProblem>& problems);

}  // namespace certctl::controller
