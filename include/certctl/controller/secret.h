#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "certctl/controller/name_request.h"
#include "certctl/controller/rotation.h"
#include "certctl/kube/client.h"
#include "certctl/pki/validate.h"
#include "certctl/util/clock.h"
#include "certctl/util/finding.h"
#include "certctl/util/result.h"

namespace certctl::controller {

inline constexpr char kManagedByLabel[] = "app.kubernetes.io/managed-by";
inline constexpr char kManagedByValue[] = "certctl";
inline constexpr char kTlsSecretType[] = "kubernetes.io/tls";

// "secret/ns/name": how findings and messages name a Secret.
std::string SecretObjectName(std::string_view ns, std::string_view name);

// What a Secret holds, ready for validation.
struct SecretPair {
  pki::PairSource source;  // parts labelled "secret/ns/name[tls.crt]", ...
  bool managed = false;    // carries app.kubernetes.io/managed-by=certctl
  std::string type;
  std::vector<Finding> findings;  // wrong-type
};

// Reads the four keys of a Secret object. Keys that are absent (or null) stay absent
// (validation reports them as missing); a type other than kubernetes.io/tls is a wrong-type
// finding. The object is the server's answer, so a field of the wrong JSON type (data that is
// not an object, a key's value that is not a string, a label, the type, the name or the
// resourceVersion that is not a string) is a kBadResponse error naming the Secret and the
// field: never read as "no data", which would make certctl replace a good CA.
Result<SecretPair> ReadSecretPair(const nlohmann::json& secret);

// A Secret as stored, read and judged.
struct StoredSecret {
  SecretPair pair;
  pki::ValidationReport validation;
  // The pair's findings and the validation's together: empty when the Secret holds a
  // valid pair that certctl may serve and inject.
  std::vector<Finding> findings;
  RotationState rotation;  // as judged (JudgeRotationState)
  // Rotation annotations that do not match what the Secret holds: ignored or clamped in
  // `rotation`, and no part of `findings` (readiness follows the pair, not the annotations).
  std::vector<RotationProblem> rotation_problems;
  // Names a follower asked the leader to issue (name_request.h), on a managed Secret; what
  // it holds that cannot be issued is told in rotation_problems.
  std::optional<NameRequest> name_request;
  // Two certctl instances with different settings on a managed Secret, as its annotations
  // record them (RecordedConflict): one line, or nothing.
  std::optional<std::string> conflict;
};

// GETs the Secret and judges it against `policy` at `now` (while a CA rotation waits for
// the targets, without renew_before: the rotation is already renewing). On a managed
// Secret the rotation annotations are read and judged against its content with `ca_overlap`
// (see JudgeRotationState); on any other they are ignored. nullopt when it does not exist;
// an error when it could not be read (wrapped with "get secret/ns/name") or the answer is
// unusable (see ReadSecretPair).
Result<std::optional<StoredSecret>> ReadStoredSecret(kube::Client& client, std::string_view ns,
                                                     std::string_view name,
                                                     const pki::ValidationPolicy& policy,
                                                     std::chrono::seconds ca_overlap,
                                                     TimePoint now);

}  // namespace certctl::controller
