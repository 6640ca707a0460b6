#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "certctl/pki/certificate.h"
#include "certctl/pki/key.h"
#include "certctl/util/clock.h"
#include "certctl/util/result.h"

namespace certctl::pki {

// How far notBefore is backdated, so peers with a slow clock accept a fresh certificate.
inline constexpr std::chrono::hours kClockSkewAllowance{1};

struct KeyPair {
  Certificate certificate;
  PrivateKey key;
};

struct CaRequest {
  std::string common_name;   // required
  std::string organization;  // optional O=
  KeyType key_type = KeyType::kEcdsaP256;
  std::chrono::seconds validity{std::chrono::hours(24 * 365 * 10)};
};

struct LeafRequest {
  std::vector<std::string> dns_names;     // SANs in this order; the first is also the CN
  std::vector<std::string> ip_addresses;  // textual IPv4/IPv6
  KeyType key_type = KeyType::kEcdsaP256;
  std::chrono::seconds validity{std::chrono::hours(24 * 365 * 10)};
};

// Self-signed root: basicConstraints CA:TRUE, pathlen:0 (critical), keyUsage keyCertSign +
// cRLSign (critical), SKI, random positive 128-bit serial, SHA-256 (SHA-384 for P-384),
// notBefore = now - kClockSkewAllowance, notAfter = now + validity.
Result<KeyPair> IssueCa(const CaRequest& request, TimePoint now);

// Server certificate signed by `ca`: CN = first DNS name (or first IP when no DNS name),
// basicConstraints CA:FALSE, keyUsage digitalSignature (+keyEncipherment for RSA),
// EKU serverAuth, SKI, AKI, SANs. notAfter never beyond the CA's notAfter.
// kInvalidArgument when there is no name at all, a name or IP is malformed, or the CA
// has already expired at `now`.
Result<KeyPair> IssueLeaf(const LeafRequest& request, const KeyPair& ca, TimePoint now);

}  // namespace certctl::pki
