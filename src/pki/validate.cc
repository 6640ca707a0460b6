#include "certctl/pki/validate.h"

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <string>
#include <utility>

#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include "certctl/pki/key.h"
#include "certctl/util/duration.h"
#include "certctl/util/text.h"

#include "pki/openssl_util.h"

namespace certctl::pki {
namespace {

using std::chrono::seconds;

bool IsBlank(std::string_view text) {
  return text.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

// `CA certificate "webhook-ca"`: what the certificate is plus its CN (or whole subject).
std::string Name(std::string_view what, const CertificateInfo& info) {
  return std::string(what) + " " +
         Quoted(info.common_name.empty() ? info.subject : info.common_name);
}

// The two largest units, truncated: "8d23h", "3h12m", "45s"; "8d" rather than "8d0h".
std::string Approximate(seconds duration) {
  constexpr std::pair<char, std::int64_t> kUnits[] = {
      {'y', 365 * 86400}, {'d', 86400}, {'h', 3600}, {'m', 60}, {'s', 1}};
  constexpr std::size_t kCount = sizeof(kUnits) / sizeof(kUnits[0]);
  std::int64_t left = std::max<std::int64_t>(duration.count(), 0);
  for (std::size_t i = 0; i < kCount; ++i) {
    const auto [symbol, size] = kUnits[i];
    if (left < size) {
      continue;
    }
    std::string out = std::to_string(left / size) + symbol;
    left %= size;
    if (i + 1 < kCount && left >= kUnits[i + 1].second) {
      out += std::to_string(left / kUnits[i + 1].second) + kUnits[i + 1].first;
    }
    return out;
  }
  return "0s";
}

// `to - from` for `from` before `to`, in whole seconds: a notAfter from the 1600s (saturated to
// 1677) is further from now than a nanosecond duration reaches. Times from certificates are
// whole seconds, so this is floor<seconds>(to - from) wherever that one does not overflow.
seconds Elapsed(TimePoint from, TimePoint to) {
  return std::chrono::floor<seconds>(to).time_since_epoch() -
         std::chrono::ceil<seconds>(from).time_since_epoch();
}

class Validator {
 public:
  Validator(const PairSource& source, const ValidationPolicy& policy, TimePoint now,
            ValidationReport& report)
      : source_(source), policy_(policy), now_(now), report_(report) {}

  void Run();

 private:
  void Add(Part part, FindingCode code, std::string message) {
    report_.findings.push_back(PartFinding{part, Finding{code, Label(part), std::move(message)}});
  }

  const std::string& Label(Part part) const {
    switch (part) {
      case Part::kCa:
        return source_.ca_label;
      case Part::kCaKey:
        return source_.ca_key_label;
      case Part::kLeaf:
        return source_.cert_label;
      case Part::kLeafKey:
        return source_.key_label;
    }
    return source_.ca_label;
  }

  // Absent or blank is kMissing; unparsable text is kUnparsable. Nullopt in both cases.
  template <typename T, typename Parse>
  std::optional<T> ParsePart(Part part, const std::optional<std::string>& pem,
                             std::string_view what, Parse parse) {
    if (!pem) {
      Add(part, FindingCode::kMissing, std::string(what) + " is missing");
      return std::nullopt;
    }
    if (IsBlank(*pem)) {
      Add(part, FindingCode::kMissing, std::string(what) + " is empty");
      return std::nullopt;
    }
    auto parsed = parse(*pem);
    if (!parsed) {
      Add(part, FindingCode::kUnparsable,
          "cannot parse the " + std::string(what) + ": " + parsed.error().message());
      return std::nullopt;
    }
    return std::move(*parsed);
  }

  void CheckIsCa(const Certificate& ca, const CertificateInfo& info);
  void CheckStrength(Part part, std::string_view what, const Certificate& cert,
                     const CertificateInfo& info);
  void CheckTimes(Part part, std::string_view what, const CertificateInfo& info);
  void FindIssuer(const Certificate& leaf);
  void CheckChain(const Certificate& leaf, const CertificateInfo& info);
  void CheckUsage(const Certificate& leaf, const CertificateInfo& info);
  void CheckNames(const Certificate& leaf, const CertificateInfo& info);

  const PairSource& source_;
  const ValidationPolicy& policy_;
  const TimePoint now_;
  ValidationReport& report_;
  std::vector<Certificate> cas_;
};

void Validator::Run() {
  if (auto cas = ParsePart<std::vector<Certificate>>(Part::kCa, source_.ca_pem, "CA bundle",
                                                     ParseCertificateBundle)) {
    cas_ = std::move(*cas);
  }
  // tls.crt may carry the chain after the leaf; only the first block is the leaf.
  auto leaf_chain = ParsePart<std::vector<Certificate>>(
      Part::kLeaf, source_.cert_pem, "server certificate", ParseCertificateBundle);
  auto leaf_key =
      ParsePart<PrivateKey>(Part::kLeafKey, source_.key_pem, "server private key",
                            [](std::string_view pem) { return PrivateKey::FromPem(pem); });
  std::optional<PrivateKey> ca_key;
  if (source_.ca_key_pem) {
    ca_key = ParsePart<PrivateKey>(Part::kCaKey, source_.ca_key_pem, "CA private key",
                                   [](std::string_view pem) { return PrivateKey::FromPem(pem); });
  }

  for (const Certificate& ca : cas_) {
    report_.ca.push_back(ca.Info());
  }
  for (std::size_t i = 0; i < cas_.size(); ++i) {
    CheckIsCa(cas_[i], report_.ca[i]);
    CheckStrength(Part::kCa, "CA certificate", cas_[i], report_.ca[i]);
  }

  if (leaf_chain) {
    const Certificate& leaf = leaf_chain->front();
    const CertificateInfo info = leaf.Info();
    report_.leaf = info;
    if (leaf_key && !leaf.MatchesKey(*leaf_key)) {
      Add(Part::kLeafKey, FindingCode::kKeyMismatch,
          "the private key does not match " + Name("server certificate", info));
    }
    FindIssuer(leaf);
    if (!cas_.empty()) {
      CheckChain(leaf, info);
    }
    CheckUsage(leaf, info);
    CheckNames(leaf, info);
    CheckStrength(Part::kLeaf, "server certificate", leaf, info);
  }

  // The issuing CA must stay valid as long as the leaf; other bundle entries are an old CA
  // kept for an overlap and are expected to run out. Without an issuer, check them all.
  for (std::size_t i = 0; i < cas_.size(); ++i) {
    if (!report_.issuer_index || *report_.issuer_index == i) {
      CheckTimes(Part::kCa, "CA certificate", report_.ca[i]);
    }
  }
  if (report_.leaf) {
    CheckTimes(Part::kLeaf, "server certificate", *report_.leaf);
  }

  // ca.key belongs to the issuing CA or, while a CA rotation has the bundle trusted before
  // the leaf moves, to the incoming CA, first in ca.crt. Either way a leaf re-issued with it
  // is trusted by the bundle.
  if (ca_key && !cas_.empty()) {
    const std::size_t index = report_.issuer_index.value_or(0);
    if (!cas_[index].MatchesKey(*ca_key) && !cas_.front().MatchesKey(*ca_key)) {
      Add(Part::kCaKey, FindingCode::kKeyMismatch,
          "the CA's private key does not match " + Name("CA certificate", report_.ca[index]));
    }
  }
}

void Validator::CheckIsCa(const Certificate& ca, const CertificateInfo& info) {
  if (!info.is_ca) {
    Add(Part::kCa, FindingCode::kNotACa,
        Name("CA certificate", info) + " is not a CA (basicConstraints CA:TRUE is missing)");
    return;
  }
  const std::uint32_t flags = X509_get_extension_flags(ca.get());
  if ((flags & EXFLAG_KUSAGE) != 0 && (X509_get_key_usage(ca.get()) & KU_KEY_CERT_SIGN) == 0) {
    Add(Part::kCa, FindingCode::kNotACa,
        Name("CA certificate", info) + " may not sign certificates (keyUsage lacks keyCertSign)");
  }
}

void Validator::CheckStrength(Part part, std::string_view what, const Certificate& cert,
                              const CertificateInfo& info) {
  const KeyDescription& key = info.key;
  std::string weak;
  if (key.algorithm == "rsa" || key.algorithm == "rsa-pss") {
    if (key.bits < 2048) {
      weak = key.name + " is below rsa-2048";
    }
  } else if (key.algorithm == "ecdsa") {
    if (key.curve != "P-256" && key.curve != "P-384" && key.curve != "P-521") {
      weak = "curve " + key.curve + " is not accepted (P-256, P-384 or P-521)";
    }
  } else if (key.algorithm != "ed25519" && key.algorithm != "ed448") {
    weak = key.name + " keys are not accepted";
  }
  if (!weak.empty()) {
    Add(part, FindingCode::kWeakKey,
        Name(what, info) + " has a weak key: " + weak +
            " (at least rsa-2048 or ecdsa-p256 required)");
  }

  int digest = NID_undef;
  int public_key = NID_undef;
  if (X509_get_signature_info(cert.get(), &digest, &public_key, nullptr, nullptr) != 1) {
    ERR_clear_error();
    if (OBJ_find_sigid_algs(X509_get_signature_nid(cert.get()), &digest, &public_key) != 1) {
      digest = NID_undef;
    }
  }
  const char* weak_digest = nullptr;
  switch (digest) {
    case NID_sha1:
      weak_digest = "SHA-1";
      break;
    case NID_md5:
    case NID_md5_sha1:
      weak_digest = "MD5";
      break;
    case NID_md4:
      weak_digest = "MD4";
      break;
    case NID_md2:
      weak_digest = "MD2";
      break;
    default:
      break;
  }
  if (weak_digest != nullptr) {
    Add(part, FindingCode::kWeakSignature,
        Name(what, info) + " is signed with " + info.signature_algorithm + " (" + weak_digest +
            " signatures are not accepted)");
  }
}

void Validator::CheckTimes(Part part, std::string_view what, const CertificateInfo& info) {
  if (now_ > info.not_after) {
    Add(part, FindingCode::kExpired,
        Name(what, info) + " expired " + FormatRfc3339(info.not_after) + ", " +
            Approximate(Elapsed(info.not_after, now_)) + " ago");
    return;
  }
  if (now_ < info.not_before) {
    Add(part, FindingCode::kNotYetValid,
        Name(what, info) + " is not valid before " + FormatRfc3339(info.not_before) + ", in " +
            Approximate(std::chrono::ceil<seconds>(info.not_before - now_)));
  }
  const auto left = std::chrono::floor<seconds>(info.not_after - now_);
  if (left <= policy_.renew_before) {
    Add(part, FindingCode::kExpiringSoon,
        Name(what, info) + " expires " + FormatRfc3339(info.not_after) + ", in " +
            Approximate(left) + " (renew-before " + FormatDuration(policy_.renew_before) + ")");
  }
}

void Validator::FindIssuer(const Certificate& leaf) {
  const X509_NAME* issuer_name = X509_get_issuer_name(leaf.get());
  for (std::size_t i = 0; i < cas_.size(); ++i) {
    X509* ca = cas_[i].get();
    EVP_PKEY* ca_key = X509_get0_pubkey(ca);
    if (X509_NAME_cmp(X509_get_subject_name(ca), issuer_name) == 0 && ca_key != nullptr &&
        X509_verify(leaf.get(), ca_key) == 1) {
      report_.issuer_index = i;
      break;
    }
  }
  ERR_clear_error();
}

// Validity periods are reported as their own findings, and a leaf's usage as wrong-usage;
// neither should also fail the chain.
int IgnoreTimesAndLeafPurpose(int ok, X509_STORE_CTX* ctx) {
  if (ok == 1) {
    return 1;
  }
  switch (X509_STORE_CTX_get_error(ctx)) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return 1;
    case X509_V_ERR_INVALID_PURPOSE:
      return X509_STORE_CTX_get_error_depth(ctx) == 0 ? 1 : 0;
    default:
      return 0;
  }
}

void Validator::CheckChain(const Certificate& leaf, const CertificateInfo& info) {
  const std::string subject = source_.cert_label + " " + Quoted(info.common_name);
  auto internal_failure = [&](std::string_view what) {
    Add(Part::kLeaf, FindingCode::kUntrustedChain,
        "cannot verify " + subject + ": " + internal::OpensslError(what).message());
  };
  internal::X509StorePtr store(X509_STORE_new());
  if (!store) {
    return internal_failure("cannot allocate a certificate store");
  }
  for (const Certificate& ca : cas_) {
    // X509_STORE_add_cert takes its own reference; the bundle keeps ours.
    if (X509_STORE_add_cert(store.get(), ca.get()) != 1) {
      return internal_failure("cannot add a CA to the certificate store");
    }
  }
  internal::X509StoreCtxPtr ctx(X509_STORE_CTX_new());
  if (!ctx || X509_STORE_CTX_init(ctx.get(), store.get(), leaf.get(), nullptr) != 1) {
    return internal_failure("cannot set up certificate verification");
  }
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx.get());
  // Any bundle entry may anchor the chain, as in Go's x509 pool. Times are judged at `now`
  // and reported separately, so the clock is never read and never fails the chain.
  X509_VERIFY_PARAM_set_time(
      param, std::chrono::system_clock::to_time_t(std::chrono::floor<seconds>(now_)));
  X509_VERIFY_PARAM_set_flags(param, X509_V_FLAG_PARTIAL_CHAIN | X509_V_FLAG_NO_CHECK_TIME);
  if (X509_STORE_CTX_set_purpose(ctx.get(), X509_PURPOSE_SSL_SERVER) != 1) {
    return internal_failure("cannot set the TLS server purpose");
  }
  X509_STORE_CTX_set_verify_cb(ctx.get(), IgnoreTimesAndLeafPurpose);
  const int verified = X509_verify_cert(ctx.get());
  ERR_clear_error();
  if (verified == 1) {
    return;
  }
  const int error = X509_STORE_CTX_get_error(ctx.get());
  const int depth = X509_STORE_CTX_get_error_depth(ctx.get());
  const std::string reason = X509_verify_cert_error_string(error);
  switch (error) {
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
      Add(Part::kLeaf, FindingCode::kUntrustedChain,
          subject + " is not signed by any CA in " + source_.ca_label + " (" + reason +
              "); its issuer is " + Quoted(info.issuer));
      return;
    default:
      break;
  }
  std::string where;
  if (depth > 0) {
    if (X509* at = X509_STORE_CTX_get_current_cert(ctx.get()); at != nullptr) {
      // Borrowed from the context; Certificate needs its own reference.
      if (X509_up_ref(at) == 1) {
        where = " at CA " + Quoted(Certificate(at).Info().common_name);
      }
    }
  }
  Add(Part::kLeaf, FindingCode::kUntrustedChain,
      subject + " does not verify against " + source_.ca_label + ": " + reason + where);
}

void Validator::CheckUsage(const Certificate& leaf, const CertificateInfo& info) {
  const std::uint32_t flags = X509_get_extension_flags(leaf.get());
  // No extendedKeyUsage at all means any usage (RFC 5280, and so OpenSSL and Go).
  if ((flags & EXFLAG_XKUSAGE) != 0 &&
      (X509_get_extended_key_usage(leaf.get()) & (XKU_SSL_SERVER | XKU_ANYEKU)) == 0) {
    Add(Part::kLeaf, FindingCode::kWrongUsage,
        Name("server certificate", info) +
            " is not for TLS servers (extendedKeyUsage lacks serverAuth)");
  }
  if ((flags & EXFLAG_KUSAGE) != 0 &&
      (X509_get_key_usage(leaf.get()) & KU_DIGITAL_SIGNATURE) == 0) {
    Add(Part::kLeaf, FindingCode::kWrongUsage,
        Name("server certificate", info) +
            " is not for TLS servers (keyUsage lacks digitalSignature)");
  }
  // A server certificate that may sign certificates turns its key's holder into a CA for
  // everyone trusting the bundle; certctl issues CA:FALSE and accepts nothing else.
  if (info.is_ca) {
    Add(Part::kLeaf, FindingCode::kWrongUsage,
        Name("server certificate", info) + " is a CA certificate (basicConstraints CA:TRUE)");
  }
}

void Validator::CheckNames(const Certificate& leaf, const CertificateInfo& info) {
  for (const std::string& name : policy_.dns_names) {
    // A required wildcard is covered by the same wildcard, which X509_check_host (matching
    // host names, not patterns) would not see.
    const std::string wanted = AsciiLower(name);
    const bool literal =
        std::any_of(info.dns_names.begin(), info.dns_names.end(),
                    [&](const std::string& san) { return AsciiLower(san) == wanted; });
    const bool matched = literal || X509_check_host(leaf.get(), name.data(), name.size(),
                                                    X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS |
                                                        X509_CHECK_FLAG_NEVER_CHECK_SUBJECT,
                                                    nullptr) == 1;
    if (!matched) {
      Add(Part::kLeaf, FindingCode::kSanMissing,
          Name("server certificate", info) + " does not cover DNS name " + Quoted(name));
    }
  }
  for (const std::string& ip : policy_.ip_addresses) {
    const int matched = X509_check_ip_asc(leaf.get(), ip.c_str(), 0);
    if (matched == -2) {
      Add(Part::kLeaf, FindingCode::kSanMissing,
          Name("server certificate", info) + " cannot cover IP address " + Quoted(ip) +
              ": not an IPv4 or IPv6 address");
    } else if (matched != 1) {
      Add(Part::kLeaf, FindingCode::kSanMissing,
          Name("server certificate", info) + " does not cover IP address " + Quoted(ip));
    }
  }
  ERR_clear_error();
}

}  // namespace

bool ValidationReport::CaOk() const {
  return std::none_of(findings.begin(), findings.end(), [](const PartFinding& finding) {
    return finding.part == Part::kCa || finding.part == Part::kCaKey;
  });
}

bool ValidationReport::LeafOk() const {
  return std::none_of(findings.begin(), findings.end(), [](const PartFinding& finding) {
    return finding.part == Part::kLeaf || finding.part == Part::kLeafKey;
  });
}

std::vector<Finding> ValidationReport::AllFindings() const {
  std::vector<Finding> out;
  out.reserve(findings.size());
  for (const PartFinding& finding : findings) {
    out.push_back(finding.finding);
  }
  return out;
}

ValidationReport Validate(const PairSource& source, const ValidationPolicy& policy, TimePoint now) {
  ERR_clear_error();
  ValidationReport report;
  Validator(source, policy, now, report).Run();
  ERR_clear_error();
  return report;
}

}  // namespace certctl::pki
