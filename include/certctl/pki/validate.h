#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "certctl/pki/certificate.h"
#include "certctl/util/clock.h"
#include "certctl/util/finding.h"

namespace certctl::pki {

inline constexpr std::chrono::hours kDefaultRenewBefore{24 * 30};

// The PEM text of each part of a pair, as found (a file, a Secret key). An empty
// optional means the part is absent.
struct PairSource {
  std::optional<std::string> ca_pem;      // ca.crt: one or more CA certificates
  std::optional<std::string> cert_pem;    // tls.crt: the leaf (extra blocks are ignored)
  std::optional<std::string> key_pem;     // tls.key
  std::optional<std::string> ca_key_pem;  // ca.key: optional; checked only when present
  // How findings name each part: file paths for files, key names for Secrets.
  std::string ca_label = "ca.crt";
  std::string cert_label = "tls.crt";
  std::string key_label = "tls.key";
  std::string ca_key_label = "ca.key";
};

struct ValidationPolicy {
  std::vector<std::string> dns_names;     // every one must be covered by the leaf
  std::vector<std::string> ip_addresses;  // every one must be in the leaf's IP SANs
  std::chrono::seconds renew_before = kDefaultRenewBefore;
};

// Which part a finding condemns: the reconcile logic re-issues the leaf alone when only
// leaf parts are at fault, and replaces the CA when a CA part is.
enum class Part { kCa, kCaKey, kLeaf, kLeafKey };

struct PartFinding {
  Part part;
  Finding finding;
};

struct ValidationReport {
  std::vector<CertificateInfo> ca;  // every certificate of ca.crt that parsed, in order
  std::optional<CertificateInfo> leaf;
  // Index into `ca` of the certificate that issued the leaf, when one did.
  std::optional<std::size_t> issuer_index;
  std::vector<PartFinding> findings;

  bool ok() const { return findings.empty(); }
  bool CaOk() const;    // no finding on kCa or kCaKey
  bool LeafOk() const;  // no finding on kLeaf or kLeafKey
  std::vector<Finding> AllFindings() const;
};

// Applies every rule of the contract at time `now`:
//  - each part present (ca.key excepted) and parsable;
//  - tls.key matches tls.crt, and ca.key (when present) matches the issuing CA or the first
//    CA of ca.crt (the incoming CA of a rotation, trusted before the leaf moves to it);
//  - the leaf verifies against ca.crt for TLS server use (any bundle entry may anchor,
//    as in Go's x509 pool); validity times are reported separately, not as chain errors;
//  - the leaf covers every policy DNS name (wildcards as TLS clients match them) and IP;
//  - neither the issuing CA nor the leaf is expired, not yet valid, or within
//    renew_before of its notAfter; other bundle entries are only checked for being CAs
//    and strong enough, as an overlapping old CA is expected to run out;
//  - CA entries carry CA:TRUE (and keyCertSign when keyUsage is present);
//  - no SHA-1/MD5 signature, keys of at least RSA-2048 or ECDSA P-256 (Ed25519 accepted).
// Messages name the subject and the time or name at fault.
ValidationReport Validate(const PairSource& source, const ValidationPolicy& policy, TimePoint now);

}  // namespace certctl::pki
