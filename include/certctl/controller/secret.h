#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "certctl/pki/validate.h"
#include "certctl/util/finding.h"

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

// Reads the four keys of a Secret object. Keys that are absent stay absent (validation
// reports them as missing); a type other than kubernetes.io/tls is a wrong-type finding.
SecretPair ReadSecretPair(const nlohmann::json& secret);

}  // namespace certctl::controller
