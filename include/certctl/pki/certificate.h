#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <openssl/types.h>

#include "certctl/pki/key.h"
#include "certctl/util/clock.h"
#include "certctl/util/result.h"

namespace certctl::pki {

struct CertificateInfo {
  std::string subject;      // one-line RFC 2253 form: "CN=svc.ns.svc,O=acme"
  std::string issuer;       // same form
  std::string common_name;  // first CN of the subject, empty when none
  std::string serial_hex;   // lower-case hex, no separators, no leading zeros
  TimePoint not_before;
  TimePoint not_after;
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;  // textual: "10.0.0.1", "::1"
  KeyDescription key;
  std::string signature_algorithm;  // OpenSSL long name, e.g. "ecdsa-with-SHA256"
  bool is_ca = false;               // basicConstraints CA:TRUE
  std::optional<long> path_length;  // basicConstraints pathlen, when set
  bool self_signed = false;         // subject == issuer and the signature verifies with own key
  std::string sha256_fingerprint;   // upper-case hex pairs joined by ':'
};

// An immutable X.509 certificate. Copies share the underlying X509.
class Certificate {
 public:
  // Exactly one CERTIFICATE block; anything else (none, several, garbage, truncated,
  // DER) is kInvalidArgument with the reason.
  static Result<Certificate> FromPem(std::string_view pem);

  std::string ToPem() const;
  CertificateInfo Info() const;

  // True when `key` is the private half of this certificate's public key.
  bool MatchesKey(const PrivateKey& key) const;

  // Same DER encoding.
  bool operator==(const Certificate& other) const;

  // For the pki implementation; never null.
  X509* get() const { return cert_.get(); }

  explicit Certificate(X509* owned);  // takes ownership

 private:
  std::shared_ptr<X509> cert_;
};

// One or more CERTIFICATE blocks (a CA bundle). Text between blocks is ignored, as
// OpenSSL and Go do; no block at all, or a damaged block, is kInvalidArgument.
Result<std::vector<Certificate>> ParseCertificateBundle(std::string_view pem);

// Concatenated PEM blocks, in order.
std::string EncodeCertificateBundle(const std::vector<Certificate>& certificates);

}  // namespace certctl::pki
