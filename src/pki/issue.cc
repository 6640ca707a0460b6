#include "certctl/pki/issue.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "certctl/pki/names.h"
#include "certctl/util/duration.h"

#include "pki/openssl_util.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace certctl::pki {
namespace {

using internal::OpensslError;
using internal::X509Ptr;

// RFC 5280 upper bounds for the subject attributes we write.
constexpr std::size_t kMaxCommonName = 64;
constexpr std::size_t kMaxOrganization = 64;
constexpr int kSerialBytes = 16;

Status Invalid(std::string message) {
  return Fail(ErrorCode::kInvalidArgument, std::move(message));
}

// Random, positive, non-zero 128-bit serial (RFC 5280: at most 20 octets, positive).
Status SetRandomSerial(X509* cert) {
  std::array<unsigned char, kSerialBytes> bytes{};
  do {
    if (RAND_bytes(bytes.data(), kSerialBytes) != 1) {
      return Fail(OpensslError("cannot generate a random serial number"));
    }
    bytes[0] &= 0x7f;  // DER INTEGER: a clear top bit keeps the number positive
  } while (std::all_of(bytes.begin(), bytes.end(), [](unsigned char b) { return b == 0; }));
  internal::BignumPtr number(BN_bin2bn(bytes.data(), kSerialBytes, nullptr));
  if (!number) {
    return Fail(OpensslError("cannot build the serial number"));
  }
  internal::Asn1IntegerPtr serial(BN_to_ASN1_INTEGER(number.get(), nullptr));
  if (!serial) {
    return Fail(OpensslError("cannot encode the serial number"));
  }
  // X509_set_serialNumber copies the integer; `serial` keeps ownership of ours.
  if (X509_set_serialNumber(cert, serial.get()) != 1) {
    return Fail(OpensslError("cannot set the serial number"));
  }
  return {};
}

Status SetValidity(X509* cert, TimePoint not_before, TimePoint not_after) {
  auto begin = internal::ToAsn1Time(not_before);
  if (!begin) {
    return Fail(begin.error());
  }
  auto end = internal::ToAsn1Time(not_after);
  if (!end) {
    return Fail(end.error());
  }
  // X509_set1_* copy the times; ours are freed by their RAII pointers.
  if (X509_set1_notBefore(cert, begin->get()) != 1 || X509_set1_notAfter(cert, end->get()) != 1) {
    return Fail(OpensslError("cannot set the validity period"));
  }
  return {};
}

Status AddNameEntry(X509_NAME* name, int nid, const std::string& value) {
  // UTF8String, as RFC 5280 asks of new certificates. Passing the type directly (not an
  // MBSTRING_ flag) also keeps a long first DNS name usable as the CN.
  if (X509_NAME_add_entry_by_NID(name, nid, V_ASN1_UTF8STRING,
                                 reinterpret_cast<const unsigned char*>(value.data()),
                                 static_cast<int>(value.size()), -1, 0) != 1) {
    return Fail(OpensslError(std::string("cannot set subject ") + OBJ_nid2sn(nid)));
  }
  return {};
}

// Adds one extension written in openssl.cnf syntax ("critical,CA:TRUE,pathlen:0").
Status AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  internal::X509ExtensionPtr extension(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  if (!extension) {
    return Fail(
        OpensslError(std::string("cannot build extension ") + OBJ_nid2sn(nid) + "=" + value));
  }
  // X509_add_ext copies the extension; `extension` still frees ours.
  if (X509_add_ext(cert, extension.get(), -1) != 1) {
    return Fail(OpensslError(std::string("cannot add extension ") + OBJ_nid2sn(nid)));
  }
  return {};
}

Result<internal::Asn1OctetStringPtr> EncodeIp(const std::string& text) {
  unsigned char bytes[sizeof(in6_addr)];
  int length = 0;
  if (inet_pton(AF_INET, text.c_str(), bytes) == 1) {
    length = 4;
  } else if (inet_pton(AF_INET6, text.c_str(), bytes) == 1) {
    length = 16;
  } else {
    return Fail(ErrorCode::kInvalidArgument,
                "invalid IP address \"" + text + "\": not an IPv4 or IPv6 address");
  }
  internal::Asn1OctetStringPtr octets(ASN1_OCTET_STRING_new());
  if (!octets || ASN1_OCTET_STRING_set(octets.get(), bytes, length) != 1) {
    return Fail(OpensslError("cannot encode IP address " + text));
  }
  return octets;
}

// Appends a subjectAltName entry of `type` holding `value`.
template <typename ValuePtr>
Status AppendName(GENERAL_NAMES* names, int type, ValuePtr value, const std::string& what) {
  internal::GeneralNamePtr name(GENERAL_NAME_new());
  if (!name) {
    return Fail(OpensslError("cannot allocate subjectAltName entry"));
  }
  // GENERAL_NAME_set0_value takes ownership of the value.
  GENERAL_NAME_set0_value(name.get(), type, value.release());
  // sk_GENERAL_NAME_push takes ownership of the entry on success; ours lets go only then.
  if (sk_GENERAL_NAME_push(names, name.get()) <= 0) {
    return Fail(OpensslError("cannot add " + what));
  }
  static_cast<void>(name.release());
  return {};
}

Status AddSubjectAltNames(X509* cert, const LeafRequest& request) {
  internal::GeneralNamesPtr names(sk_GENERAL_NAME_new_null());
  if (!names) {
    return Fail(OpensslError("cannot allocate subjectAltName"));
  }
  for (const std::string& dns : request.dns_names) {
    internal::Asn1Ia5StringPtr text(ASN1_IA5STRING_new());
    if (!text || ASN1_STRING_set(text.get(), dns.data(), static_cast<int>(dns.size())) != 1) {
      return Fail(OpensslError("cannot encode DNS name " + dns));
    }
    if (auto status = AppendName(names.get(), GEN_DNS, std::move(text), "DNS name " + dns);
        !status) {
      return status;
    }
  }
  for (const std::string& ip : request.ip_addresses) {
    auto octets = EncodeIp(ip);
    if (!octets) {
      return Fail(octets.error());
    }
    if (auto status = AppendName(names.get(), GEN_IPADD, std::move(*octets), "IP address " + ip);
        !status) {
      return status;
    }
  }
  internal::X509ExtensionPtr extension(
      X509V3_EXT_i2d(NID_subject_alt_name, /*crit=*/0, names.get()));
  if (!extension) {
    return Fail(OpensslError("cannot encode subjectAltName"));
  }
  // X509_add_ext copies the extension; `extension` still frees ours.
  if (X509_add_ext(cert, extension.get(), -1) != 1) {
    return Fail(OpensslError("cannot add subjectAltName"));
  }
  return {};
}

// SHA-256, or the digest matching the curve strength for larger EC keys; none for EdDSA,
// which hashes internally.
const EVP_MD* DigestFor(const PrivateKey& signing_key) {
  if (EVP_PKEY_is_a(signing_key.get(), "ED25519") || EVP_PKEY_is_a(signing_key.get(), "ED448")) {
    return nullptr;
  }
  const KeyDescription key = signing_key.Describe();
  if (key.curve == "P-384") {
    return EVP_sha384();
  }
  if (key.curve == "P-521") {
    return EVP_sha512();
  }
  return EVP_sha256();
}

Status Sign(X509* cert, const PrivateKey& signing_key) {
  if (X509_sign(cert, signing_key.get(), DigestFor(signing_key)) <= 0) {
    return Fail(OpensslError("cannot sign the certificate"));
  }
  return {};
}

// A v3 certificate with serial, validity, subject, issuer and public key set.
Result<X509Ptr> NewCertificate(const X509_NAME* subject, const X509_NAME* issuer,
                               const PrivateKey& subject_key, TimePoint not_before,
                               TimePoint not_after) {
  X509Ptr cert(X509_new());
  if (!cert) {
    return Fail(OpensslError("cannot allocate a certificate"));
  }
  if (X509_set_version(cert.get(), X509_VERSION_3) != 1) {
    return Fail(OpensslError("cannot set the certificate version"));
  }
  if (auto status = SetRandomSerial(cert.get()); !status) {
    return Fail(status.error());
  }
  if (auto status = SetValidity(cert.get(), not_before, not_after); !status) {
    return Fail(status.error());
  }
  // X509_set_subject_name / X509_set_issuer_name copy the names; X509_set_pubkey takes its
  // own reference to the key.
  if (X509_set_subject_name(cert.get(), subject) != 1 ||
      X509_set_issuer_name(cert.get(), issuer) != 1 ||
      X509_set_pubkey(cert.get(), subject_key.get()) != 1) {
    return Fail(OpensslError("cannot set subject, issuer or public key"));
  }
  return cert;
}

Status CheckValidity(std::chrono::seconds validity) {
  if (validity <= std::chrono::seconds::zero()) {
    return Invalid("validity must be positive");
  }
  if (validity > kMaxDuration) {
    return Invalid("validity " + FormatDuration(validity) + " is longer than the maximum of " +
                   FormatDuration(kMaxDuration));
  }
  return {};
}

Status CheckLeafRequest(const LeafRequest& request) {
  if (request.dns_names.empty() && request.ip_addresses.empty()) {
    return Invalid("the server certificate needs at least one DNS name or IP address");
  }
  for (const std::string& name : request.dns_names) {
    if (auto status = ValidateDnsName(name, Wildcard::kAllow); !status) {
      return Invalid("invalid DNS name \"" + name + "\": " + status.error().message());
    }
  }
  for (const std::string& ip : request.ip_addresses) {
    if (auto status = ValidateIpAddress(ip); !status) {
      return Invalid("invalid IP address \"" + ip + "\": " + status.error().message());
    }
  }
  return CheckValidity(request.validity);
}

}  // namespace

Result<KeyPair> IssueCa(const CaRequest& request, TimePoint now) {
  ERR_clear_error();
  if (request.common_name.empty()) {
    return Fail(ErrorCode::kInvalidArgument, "the CA needs a common name");
  }
  if (request.common_name.size() > kMaxCommonName) {
    return Fail(ErrorCode::kInvalidArgument,
                "CA common name \"" + request.common_name + "\" is longer than 64 characters");
  }
  if (request.organization.size() > kMaxOrganization) {
    return Fail(ErrorCode::kInvalidArgument,
                "CA organization \"" + request.organization + "\" is longer than 64 characters");
  }
  if (auto status = CheckValidity(request.validity); !status) {
    return Fail(status.error().Wrap("CA"));
  }
  auto key = PrivateKey::Generate(request.key_type);
  if (!key) {
    return Fail(key.error());
  }

  internal::X509NamePtr name(X509_NAME_new());
  if (!name) {
    return Fail(OpensslError("cannot allocate the CA subject"));
  }
  // O before CN, so the RFC 2253 form reads "CN=...,O=...".
  if (!request.organization.empty()) {
    if (auto status = AddNameEntry(name.get(), NID_organizationName, request.organization);
        !status) {
      return Fail(status.error());
    }
  }
  if (auto status = AddNameEntry(name.get(), NID_commonName, request.common_name); !status) {
    return Fail(status.error());
  }

  auto cert = NewCertificate(name.get(), name.get(), *key, now - kClockSkewAllowance,
                             SaturatingAdd(now, request.validity));
  if (!cert) {
    return Fail(cert.error());
  }
  X509* raw = cert->get();
  // Self-signed: the certificate is its own issuer for SKI/AKI computation.
  for (const auto& [nid, value] : {
           std::pair{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
           std::pair{NID_key_usage, "critical,keyCertSign,cRLSign"},
           std::pair{NID_subject_key_identifier, "hash"},
       }) {
    if (auto status = AddExtension(raw, raw, nid, value); !status) {
      return Fail(status.error());
    }
  }
  if (auto status = Sign(raw, *key); !status) {
    return Fail(status.error());
  }
  // Certificate takes ownership of the X509.
  return KeyPair{Certificate(cert->release()), std::move(*key)};
}

Result<KeyPair> IssueLeaf(const LeafRequest& request, const KeyPair& ca, TimePoint now) {
  ERR_clear_error();
  if (auto status = CheckLeafRequest(request); !status) {
    return Fail(status.error());
  }
  const CertificateInfo ca_info = ca.certificate.Info();
  const std::string ca_name = "CA \"" + ca_info.common_name + "\"";
  if (now > ca_info.not_after) {
    return Fail(ErrorCode::kInvalidArgument, ca_name + " expired at " +
                                                 FormatRfc3339(ca_info.not_after) +
                                                 "; it cannot issue certificates");
  }
  if (!ca_info.is_ca) {
    return Fail(ErrorCode::kInvalidArgument,
                ca_name + " is not a CA (basicConstraints CA:TRUE is missing)");
  }
  if (!ca.certificate.MatchesKey(ca.key)) {
    return Fail(ErrorCode::kInvalidArgument,
                "the CA key does not belong to the certificate of " + ca_name);
  }
  auto key = PrivateKey::Generate(request.key_type);
  if (!key) {
    return Fail(key.error());
  }

  const std::string& common_name =
      request.dns_names.empty() ? request.ip_addresses.front() : request.dns_names.front();
  internal::X509NamePtr subject(X509_NAME_new());
  if (!subject) {
    return Fail(OpensslError("cannot allocate the certificate subject"));
  }
  if (auto status = AddNameEntry(subject.get(), NID_commonName, common_name); !status) {
    return Fail(status.error());
  }

  // Never beyond the CA: a client would reject the chain once the CA has expired anyway.
  const TimePoint not_after = std::min(SaturatingAdd(now, request.validity), ca_info.not_after);
  X509* ca_cert = ca.certificate.get();
  auto cert = NewCertificate(subject.get(), X509_get_subject_name(ca_cert), *key,
                             now - kClockSkewAllowance, not_after);
  if (!cert) {
    return Fail(cert.error());
  }
  X509* raw = cert->get();
  const bool rsa = key->Describe().algorithm == "rsa";
  // keyid:always needs the issuer's SKI; a CA made elsewhere may lack it, and then the
  // issuer name and serial identify it instead.
  const bool ca_has_ski = X509_get_ext_by_NID(ca_cert, NID_subject_key_identifier, -1) >= 0;
  for (const auto& [nid, value] : {
           std::pair{NID_basic_constraints, "critical,CA:FALSE"},
           std::pair{NID_key_usage, rsa ? "critical,digitalSignature,keyEncipherment"
                                        : "critical,digitalSignature"},
           std::pair{NID_ext_key_usage, "serverAuth"},
           std::pair{NID_subject_key_identifier, "hash"},
           std::pair{NID_authority_key_identifier, ca_has_ski ? "keyid:always" : "issuer:always"},
       }) {
    if (auto status = AddExtension(raw, ca_cert, nid, value); !status) {
      return Fail(status.error());
    }
  }
  if (auto status = AddSubjectAltNames(raw, request); !status) {
    return Fail(status.error());
  }
  if (auto status = Sign(raw, ca.key); !status) {
    return Fail(status.error());
  }
  // Certificate takes ownership of the X509.
  return KeyPair{Certificate(cert->release()), std::move(*key)};
}

}  // namespace certctl::pki
