#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace certctl {

// Stable vocabulary of `certctl check`: the kebab-case names are part of the JSON
// contract and must never change meaning.
enum class FindingCode {
  kMissing,           // a required object or key is absent
  kUnparsable,        // PEM/DER that does not parse
  kExpired,           // notAfter is in the past
  kNotYetValid,       // notBefore is in the future
  kExpiringSoon,      // less than --renew-before left
  kSanMissing,        // a required DNS name or IP is not covered by the leaf
  kKeyMismatch,       // private key does not belong to the certificate
  kUntrustedChain,    // leaf does not verify against the CA bundle
  kNotACa,            // a CA bundle entry that may not sign certificates
  kWrongUsage,        // leaf not usable for TLS server authentication
  kWeakKey,           // below RSA-2048 / ECDSA P-256, or an unsupported algorithm
  kWeakSignature,     // SHA-1 or MD5 signature
  kWrongType,         // Secret type is not kubernetes.io/tls
  kCaBundleMismatch,  // a target's caBundle lacks the CA that issued the leaf
  kTargetMissing,     // a named target does not exist
  // What the API server will find when it calls a target (SPEC 4a):
  kTargetNameNotCovered,  // a name a target calls is not among the leaf's SANs
  kTargetInvalid,         // a target's clientConfig names nothing the API server can call
  kServiceMissing,        // the Service a target calls does not exist
  kServicePortMissing,    // the Service lacks the port the target calls
  kNoReadyEndpoints,      // the Service has no ready endpoint for that port
  // A rotation annotation certctl does not act on as it stands (an unknown value, a phase the
  // Secret's content does not match, a time beyond the overlap): ignored or clamped.
  kRotationStateInvalid,
  // Two certctl instances with different settings manage one Secret: one leaves the other's
  // certificate as it is (its objection recorded on the Secret).
  kConflictingConfiguration,
  // `certctl audit`, about any webhook in the cluster (SPEC 9a):
  kCaBundleUnparsable,      // a caBundle that holds no certificate that parses
  kCaBundleExpired,         // every certificate of a caBundle has expired
  kCaBundleExpiringSoon,    // every certificate of a caBundle ends within --renew-before
  kCaBundleMissing,         // a Service entry without a caBundle
  kSelfDeadlock,            // Fail, and it intercepts the creation of its own pods
  kTimeoutsAddUp,           // one operation waits on webhooks for more than 30 s
  kHandshakeFailed,         // the TLS handshake the API server would make fails
  kServingCertExpiringSoon  // the certificate a webhook serves ends within --renew-before
};

std::string_view FindingCodeName(FindingCode code);
std::optional<FindingCode> ParseFindingCode(std::string_view name);

// Where each code's cause and fix are told: its section in the repository's
// docs/troubleshooting.md, whose heading is the code.
std::string FindingHelp(FindingCode code);

// "what to do: docs/troubleshooting.md#a, docs/troubleshooting.md#b", the distinct codes in
// the order they first appear; empty for none. The line after a report's findings.
std::string FindingHelpLine(const std::vector<FindingCode>& codes);

struct Finding {
  FindingCode code;
  std::string
      object;  // what it is about: a file path, "tls.crt", "validatingwebhookconfiguration/x"
  std::string message;  // plain words, no trailing period
};

// "object: message; object: message", for one-line errors.
std::string JoinFindings(const std::vector<Finding>& findings);

}  // namespace certctl
