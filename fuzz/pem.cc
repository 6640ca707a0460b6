// PEM certificates, CA bundles and private keys, and the validation of a pair read from files
// or a Secret. The input's parts, split by the separator: ca.crt, tls.crt, tls.key, ca.key
// (a missing part is an absent file), then policy names one a line ("ip:" for addresses). A
// part that starts like DER (0x30) is armoured as PEM first, so mutations reach the X.509
// and key parsers directly rather than through base64. Properties:
//  - FromPem accepts exactly the single-certificate bundles, and what it accepts re-encodes
//    (ToPem) to a certificate that parses back equal, with the same description;
//  - a bundle re-encodes to the same certificates; a key re-encodes to a key of the same kind;
//  - Validate describes what parsed and nothing else: one CA entry per certificate of
//    ca.crt, a leaf exactly when tls.crt parses, an issuer inside the bundle, every finding
//    labelled with its part and worded; absent parts are reported missing; it is repeatable.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "certctl/pki/certificate.h"
#include "certctl/pki/key.h"
#include "certctl/pki/validate.h"
#include "certctl/util/base64.h"
#include "certctl/util/finding.h"

#include "fuzz_support.h"

namespace {

using certctl::FindingCode;
using certctl::TimePoint;
using certctl::pki::Certificate;
using certctl::pki::CertificateInfo;
using certctl::pki::PairSource;
using certctl::pki::Part;
using certctl::pki::PrivateKey;
using certctl::pki::ValidationPolicy;
using certctl::pki::ValidationReport;

// 2030-01-01T00:00:00Z: inside the validity of the seed certificates.
const TimePoint kNow{std::chrono::seconds(1893456000)};

// DER-looking bytes become a PEM block with `label`; anything else stays as it is.
std::string Armour(std::string_view part, std::string_view label) {
  if (part.empty() || static_cast<unsigned char>(part.front()) != 0x30) {
    return std::string(part);
  }
  const std::string base64 = certctl::Base64Encode(part);
  std::string pem = "-----BEGIN " + std::string(label) + "-----\n";
  for (std::size_t at = 0; at < base64.size(); at += 64) {
    pem += base64.substr(at, 64);
    pem += '\n';
  }
  pem += "-----END " + std::string(label) + "-----\n";
  return pem;
}

bool IsBlank(const std::string& text) {
  return text.find_first_not_of(" \t\r\n") == std::string::npos;
}

bool SameInfo(const CertificateInfo& a, const CertificateInfo& b) {
  return a.subject == b.subject && a.issuer == b.issuer && a.serial_hex == b.serial_hex &&
         a.not_before == b.not_before && a.not_after == b.not_after && a.dns_names == b.dns_names &&
         a.ip_addresses == b.ip_addresses && a.key.name == b.key.name && a.is_ca == b.is_ca &&
         a.path_length == b.path_length && a.self_signed == b.self_signed &&
         a.sha256_fingerprint == b.sha256_fingerprint;
}

void CheckCertificate(const std::string& pem) {
  const auto certificate = Certificate::FromPem(pem);
  const auto bundle = certctl::pki::ParseCertificateBundle(pem);
  FUZZ_CHECK(certificate.has_value() == (bundle.has_value() && bundle->size() == 1));
  if (!certificate) {
    FUZZ_CHECK(certificate.error().code() == certctl::ErrorCode::kInvalidArgument);
    return;
  }
  FUZZ_CHECK(bundle->front() == *certificate);
  const CertificateInfo info = certificate->Info();
  FUZZ_CHECK(!info.sha256_fingerprint.empty());
  const std::string encoded = certificate->ToPem();
  FUZZ_CHECK(!encoded.empty());
  const auto again = Certificate::FromPem(encoded);
  FUZZ_CHECK(again.has_value() && *again == *certificate);
  FUZZ_CHECK(SameInfo(again->Info(), info));
}

// The number of certificates the bundle holds, when it parses.
std::optional<std::size_t> CheckBundle(const std::string& pem) {
  const auto bundle = certctl::pki::ParseCertificateBundle(pem);
  if (!bundle) {
    FUZZ_CHECK(bundle.error().code() == certctl::ErrorCode::kInvalidArgument);
    return std::nullopt;
  }
  FUZZ_CHECK(!bundle->empty());
  const auto again =
      certctl::pki::ParseCertificateBundle(certctl::pki::EncodeCertificateBundle(*bundle));
  FUZZ_CHECK(again.has_value() && again->size() == bundle->size());
  for (std::size_t i = 0; i < bundle->size(); ++i) {
    FUZZ_CHECK((*again)[i] == (*bundle)[i]);
    static_cast<void>((*bundle)[i].Info());
  }
  return bundle->size();
}

void CheckKey(const std::string& pem) {
  const auto key = PrivateKey::FromPem(pem);
  if (!key) {
    FUZZ_CHECK(key.error().code() == certctl::ErrorCode::kInvalidArgument);
    return;
  }
  const auto description = key->Describe();
  FUZZ_CHECK(!description.name.empty());
  const auto encoded = key->ToPem();
  FUZZ_CHECK(encoded.has_value());
  const auto again = PrivateKey::FromPem(*encoded);
  FUZZ_CHECK(again.has_value());
  FUZZ_CHECK(again->Describe().name == description.name);
}

const std::string& LabelOf(const PairSource& source, Part part) {
  switch (part) {
    case Part::kCa:
      return source.ca_label;
    case Part::kCaKey:
      return source.ca_key_label;
    case Part::kLeaf:
      return source.cert_label;
    case Part::kLeafKey:
      return source.key_label;
  }
  __builtin_trap();
}

bool HasFinding(const ValidationReport& report, Part part, FindingCode code) {
  for (const auto& finding : report.findings) {
    if (finding.part == part && finding.finding.code == code) {
      return true;
    }
  }
  return false;
}

bool SameFindings(const ValidationReport& a, const ValidationReport& b) {
  if (a.findings.size() != b.findings.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.findings.size(); ++i) {
    const auto& x = a.findings[i];
    const auto& y = b.findings[i];
    if (x.part != y.part || x.finding.code != y.finding.code ||
        x.finding.message != y.finding.message) {
      return false;
    }
  }
  return a.issuer_index == b.issuer_index;
}

void CheckValidate(const PairSource& source, const ValidationPolicy& policy) {
  const ValidationReport report = certctl::pki::Validate(source, policy, kNow);
  FUZZ_CHECK(report.ok() == report.findings.empty());
  FUZZ_CHECK(report.ok() == (report.CaOk() && report.LeafOk()));
  for (const auto& finding : report.findings) {
    FUZZ_CHECK(finding.finding.object == LabelOf(source, finding.part));
    FUZZ_CHECK(!finding.finding.message.empty());
  }

  std::optional<std::size_t> ca_count;
  if (source.ca_pem && !IsBlank(*source.ca_pem)) {
    if (const auto bundle = certctl::pki::ParseCertificateBundle(*source.ca_pem)) {
      ca_count = bundle->size();
    }
  }
  FUZZ_CHECK(report.ca.size() == ca_count.value_or(0));
  const bool leaf_parses = source.cert_pem && !IsBlank(*source.cert_pem) &&
                           certctl::pki::ParseCertificateBundle(*source.cert_pem).has_value();
  FUZZ_CHECK(report.leaf.has_value() == leaf_parses);
  if (report.issuer_index) {
    FUZZ_CHECK(report.leaf.has_value() && *report.issuer_index < report.ca.size());
  }
  if (!source.ca_pem) {
    FUZZ_CHECK(HasFinding(report, Part::kCa, FindingCode::kMissing));
  }
  if (!source.cert_pem) {
    FUZZ_CHECK(HasFinding(report, Part::kLeaf, FindingCode::kMissing));
  }
  if (!source.key_pem) {
    FUZZ_CHECK(HasFinding(report, Part::kLeafKey, FindingCode::kMissing));
  }

  FUZZ_CHECK(SameFindings(report, certctl::pki::Validate(source, policy, kNow)));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto parts = certctl::fuzz::SplitParts(certctl::fuzz::AsText(data, size), 5);
  PairSource source;
  const char* labels[] = {"CERTIFICATE", "CERTIFICATE", "PRIVATE KEY", "PRIVATE KEY"};
  std::optional<std::string>* fields[] = {&source.ca_pem, &source.cert_pem, &source.key_pem,
                                          &source.ca_key_pem};
  for (std::size_t i = 0; i < 4 && i < parts.size(); ++i) {
    *fields[i] = Armour(parts[i], labels[i]);
  }

  if (source.cert_pem) {
    CheckCertificate(*source.cert_pem);
  }
  if (source.ca_pem) {
    static_cast<void>(CheckBundle(*source.ca_pem));
  }
  if (source.key_pem) {
    CheckKey(*source.key_pem);
  }
  if (source.ca_key_pem) {
    CheckKey(*source.ca_key_pem);
  }

  ValidationPolicy policy;
  if (parts.size() > 4) {
    std::string_view names = parts[4];
    while (!names.empty() && policy.dns_names.size() + policy.ip_addresses.size() < 8) {
      const std::size_t end = names.find('\n');
      const std::string_view line = names.substr(0, end);
      names.remove_prefix(end == std::string_view::npos ? names.size() : end + 1);
      if (line.substr(0, 3) == "ip:") {
        policy.ip_addresses.emplace_back(line.substr(3));
      } else if (!line.empty()) {
        policy.dns_names.emplace_back(line);
      }
    }
  }
  CheckValidate(source, policy);
  return 0;
}
