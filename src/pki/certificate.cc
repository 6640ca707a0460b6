#include "certctl/pki/certificate.h"

#include <cctype>
#include <cstdio>
#include <string>
#include <utility>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "pki/openssl_util.h"
#include <arpa/inet.h>
#include <sys/socket.h>

namespace certctl::pki {
namespace {

using internal::OpensslError;
using internal::X509Ptr;

bool IsCertificateLabel(std::string_view label) {
  return label == "CERTIFICATE" || label == "X509 CERTIFICATE";
}

// Parses every CERTIFICATE block of `pem`; other blocks are ignored.
Result<std::vector<Certificate>> ParseBlocks(std::string_view pem) {
  ERR_clear_error();
  auto blocks = internal::ScanPem(pem, "certificate");
  if (!blocks) {
    return Fail(blocks.error());
  }
  std::vector<Certificate> out;
  std::string other_labels;
  for (const internal::PemBlock& block : *blocks) {
    if (!IsCertificateLabel(block.label)) {
      other_labels += other_labels.empty() ? "" : ", ";
      other_labels += block.label;
      continue;
    }
    auto bio = internal::ReadBio(block.text);
    if (!bio) {
      return Fail(bio.error());
    }
    X509Ptr cert(PEM_read_bio_X509(bio->get(), nullptr, nullptr, nullptr));
    if (!cert) {
      return Fail(OpensslError("cannot parse certificate " + std::to_string(out.size() + 1),
                               ErrorCode::kInvalidArgument));
    }
    // Certificate takes ownership of the X509.
    out.emplace_back(cert.release());
  }
  if (out.empty()) {
    return Fail(ErrorCode::kInvalidArgument,
                "no certificate found, expected a PEM certificate (found " + other_labels + ")");
  }
  return out;
}

std::string NameToString(const X509_NAME* name) {
  auto bio = internal::WriteBio();
  if (!bio || name == nullptr) {
    return {};
  }
  if (X509_NAME_print_ex(bio->get(), name, 0, XN_FLAG_RFC2253) < 0) {
    ERR_clear_error();
    return {};
  }
  return internal::BioContents(bio->get());
}

std::string CommonName(const X509_NAME* name) {
  const int index = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  if (index < 0) {
    return {};
  }
  const ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, index));
  unsigned char* utf8 = nullptr;
  const int length = ASN1_STRING_to_UTF8(&utf8, data);
  internal::OpensslBytes owned(utf8);
  if (length < 0) {
    ERR_clear_error();
    return {};
  }
  return std::string(reinterpret_cast<const char*>(owned.get()), static_cast<std::size_t>(length));
}

std::string SerialHex(const ASN1_INTEGER* serial) {
  internal::BignumPtr number(ASN1_INTEGER_to_BN(serial, nullptr));
  if (!number) {
    ERR_clear_error();
    return {};
  }
  internal::OpensslString hex(BN_bn2hex(number.get()));
  if (!hex) {
    ERR_clear_error();
    return {};
  }
  std::string text(hex.get());
  std::string sign;
  if (!text.empty() && text.front() == '-') {
    sign = "-";
    text.erase(0, 1);
  }
  const std::size_t first = text.find_first_not_of('0');
  text = first == std::string::npos ? "0" : text.substr(first);
  for (char& c : text) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return sign + text;
}

std::string IpToText(const ASN1_OCTET_STRING* address) {
  const unsigned char* data = ASN1_STRING_get0_data(address);
  const int length = ASN1_STRING_length(address);
  char text[INET6_ADDRSTRLEN] = {};
  if (length == 4 && inet_ntop(AF_INET, data, text, sizeof(text)) != nullptr) {
    return text;
  }
  if (length == 16 && inet_ntop(AF_INET6, data, text, sizeof(text)) != nullptr) {
    return text;
  }
  // Not an address (e.g. a name-constraint style address/mask): show the bytes.
  std::string hex;
  for (int i = 0; i < length; ++i) {
    char pair[3];
    std::snprintf(pair, sizeof(pair), "%02x", data[i]);
    hex += pair;
  }
  return hex;
}

void ReadSubjectAltNames(X509* cert, CertificateInfo& info) {
  internal::GeneralNamesPtr names(
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr)));
  if (!names) {
    ERR_clear_error();
    return;
  }
  for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
    if (name->type == GEN_DNS) {
      const ASN1_IA5STRING* dns = name->d.dNSName;
      info.dns_names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(dns)),
                                  static_cast<std::size_t>(ASN1_STRING_length(dns)));
    } else if (name->type == GEN_IPADD) {
      info.ip_addresses.push_back(IpToText(name->d.iPAddress));
    }
  }
}

void ReadBasicConstraints(X509* cert, CertificateInfo& info) {
  internal::BasicConstraintsPtr constraints(static_cast<BASIC_CONSTRAINTS*>(
      X509_get_ext_d2i(cert, NID_basic_constraints, nullptr, nullptr)));
  if (!constraints) {
    ERR_clear_error();
    return;
  }
  info.is_ca = constraints->ca != 0;
  if (info.is_ca && constraints->pathlen != nullptr) {
    const long length = ASN1_INTEGER_get(constraints->pathlen);
    if (length >= 0) {
      info.path_length = length;
    }
  }
}

std::string Sha256Fingerprint(const X509* cert) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (X509_digest(cert, EVP_sha256(), digest, &length) != 1) {
    ERR_clear_error();
    return {};
  }
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    char pair[4];
    std::snprintf(pair, sizeof(pair), "%02X", digest[i]);
    if (!out.empty()) {
      out += ':';
    }
    out += pair;
  }
  return out;
}

std::string Der(X509* cert) {
  unsigned char* der = nullptr;
  const int length = i2d_X509(cert, &der);
  internal::OpensslBytes owned(der);
  if (length <= 0) {
    ERR_clear_error();
    return {};
  }
  return std::string(reinterpret_cast<const char*>(owned.get()), static_cast<std::size_t>(length));
}

}  // namespace

Certificate::Certificate(X509* owned) : cert_(owned, X509_free) {}

Result<Certificate> Certificate::FromPem(std::string_view pem) {
  auto certificates = ParseBlocks(pem);
  if (!certificates) {
    return Fail(certificates.error());
  }
  if (certificates->size() != 1) {
    return Fail(ErrorCode::kInvalidArgument, "found " + std::to_string(certificates->size()) +
                                                 " certificates, expected exactly one");
  }
  return std::move(certificates->front());
}

Result<std::vector<Certificate>> ParseCertificateBundle(std::string_view pem) {
  return ParseBlocks(pem);
}

std::string Certificate::ToPem() const {
  auto bio = internal::WriteBio();
  if (!bio) {
    return {};
  }
  if (PEM_write_bio_X509(bio->get(), cert_.get()) != 1) {
    ERR_clear_error();
    return {};
  }
  return internal::BioContents(bio->get());
}

std::string EncodeCertificateBundle(const std::vector<Certificate>& certificates) {
  std::string out;
  for (const Certificate& certificate : certificates) {
    out += certificate.ToPem();
  }
  return out;
}

CertificateInfo Certificate::Info() const {
  ERR_clear_error();
  X509* cert = cert_.get();
  CertificateInfo info;
  const X509_NAME* subject = X509_get_subject_name(cert);
  const X509_NAME* issuer = X509_get_issuer_name(cert);
  info.subject = NameToString(subject);
  info.issuer = NameToString(issuer);
  info.common_name = CommonName(subject);
  info.serial_hex = SerialHex(X509_get0_serialNumber(cert));
  if (auto not_before = internal::ToTimePoint(X509_get0_notBefore(cert))) {
    info.not_before = *not_before;
  }
  if (auto not_after = internal::ToTimePoint(X509_get0_notAfter(cert))) {
    info.not_after = *not_after;
  }
  ReadSubjectAltNames(cert, info);
  info.key = internal::DescribeKey(X509_get0_pubkey(cert));
  const char* signature = OBJ_nid2ln(X509_get_signature_nid(cert));
  info.signature_algorithm = signature != nullptr ? signature : "unknown";
  ReadBasicConstraints(cert, info);
  EVP_PKEY* own_key = X509_get0_pubkey(cert);
  info.self_signed =
      X509_NAME_cmp(subject, issuer) == 0 && own_key != nullptr && X509_verify(cert, own_key) == 1;
  info.sha256_fingerprint = Sha256Fingerprint(cert);
  // Nothing above is an error worth reporting; leave the queue clean for the next caller.
  ERR_clear_error();
  return info;
}

bool Certificate::MatchesKey(const PrivateKey& key) const {
  const EVP_PKEY* public_key = X509_get0_pubkey(cert_.get());
  const bool match = public_key != nullptr && EVP_PKEY_eq(public_key, key.get()) == 1;
  ERR_clear_error();
  return match;
}

bool Certificate::operator==(const Certificate& other) const {
  if (cert_ == other.cert_) {
    return true;
  }
  const std::string mine = Der(cert_.get());
  return !mine.empty() && mine == Der(other.cert_.get());
}

}  // namespace certctl::pki
