// The openssl CLI as an independent oracle: it must accept what we make, and we must read
// what it makes the way it does.

#include <chrono>
#include <ctime>
#include <ostream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include "certctl/pki/certificate.h"
#include "certctl/pki/issue.h"
#include "certctl/pki/key.h"
#include "certctl/pki/validate.h"

#include "support/process.h"
#include "support/temp_dir.h"
#include "support/test_pki.h"

namespace certctl::pki {
namespace openssl_oracle_test {
namespace {

using certctl::testing::CaBuilder;
using certctl::testing::KeyPem;
using certctl::testing::LeafBuilder;
using certctl::testing::Openssl;
using certctl::testing::RunProcess;
using certctl::testing::TempDir;
using std::chrono::hours;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kSanText[] = "DNS:svc.ns.svc, DNS:svc, DNS:svc.ns, DNS:svc.ns.svc.cluster.local";

struct Pair {
  KeyPair ca;
  KeyPair leaf;
};

// Issued at the real current time, so `openssl verify` (which uses the real clock) agrees.
Pair MustPair(KeyType type) {
  const KeyPair ca =
      CaBuilder("webhook-ca").Organization("acme").Key(type).Validity(hours(24 * 365 * 10)).Build();
  const KeyPair leaf = LeafBuilder(ca)
                           .DnsNames({"svc.ns.svc", "svc", "svc.ns", "svc.ns.svc.cluster.local"})
                           .IpAddresses({"10.0.0.7", "fd00::1"})
                           .Key(type)
                           .Validity(hours(24 * 365))
                           .Build();
  return Pair{ca, leaf};
}

void WritePair(const TempDir& dir, const Pair& pair) {
  dir.Write("ca.crt", pair.ca.certificate.ToPem());
  dir.Write("ca.key", KeyPem(pair.ca.key));
  dir.Write("tls.crt", pair.leaf.certificate.ToPem());
  dir.Write("tls.key", KeyPem(pair.leaf.key));
}

// "Nov  2 07:55:25 2026 GMT", as `openssl x509 -dates` prints.
std::string OpensslDate(TimePoint time) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buffer[64];
  const std::size_t length = std::strftime(buffer, sizeof(buffer), "%b %e %H:%M:%S %Y GMT", &utc);
  return std::string(buffer, length);
}

// Upper-case hex with leading zeros removed, as Info() writes it (but upper-case).
std::string NormalizeSerial(std::string hex) {
  const std::size_t first = hex.find_first_not_of('0');
  hex = first == std::string::npos ? "0" : hex.substr(first);
  for (char& c : hex) {
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return hex;
}

std::string Line(const std::string& text, const std::string& prefix) {
  const std::size_t start = text.find(prefix);
  if (start == std::string::npos) {
    return {};
  }
  const std::size_t end = text.find('\n', start);
  return text.substr(start + prefix.size(), end - start - prefix.size());
}

}  // namespace
}  // namespace openssl_oracle_test

// Names the key type in test output instead of its bytes.
void PrintTo(KeyType type, std::ostream* out) { *out << KeyTypeName(type); }

namespace openssl_oracle_test {
namespace {

class PkiOracle : public ::testing::TestWithParam<KeyType> {};

TEST_P(PkiOracle, OpensslVerifiesOurPairForTlsServers) {
  const Pair pair = MustPair(GetParam());
  TempDir dir;
  WritePair(dir, pair);

  const std::string verified =
      Openssl({"verify", "-CAfile", dir / "ca.crt", "-purpose", "sslserver", dir / "tls.crt"});
  EXPECT_THAT(verified, HasSubstr(": OK"));

  const std::string ca_text =
      Openssl({"x509", "-noout", "-ext",
               "basicConstraints,keyUsage,subjectKeyIdentifier,authorityKeyIdentifier", "-in",
               dir / "ca.crt"});
  EXPECT_THAT(ca_text, HasSubstr("X509v3 Basic Constraints: critical"));
  EXPECT_THAT(ca_text, HasSubstr("CA:TRUE, pathlen:0"));
  EXPECT_THAT(ca_text, HasSubstr("X509v3 Key Usage: critical"));
  EXPECT_THAT(ca_text, HasSubstr("Certificate Sign, CRL Sign"));
  EXPECT_THAT(ca_text, HasSubstr("X509v3 Subject Key Identifier"));
  EXPECT_THAT(ca_text, Not(HasSubstr("Digital Signature")));

  const std::string leaf_text =
      Openssl({"x509", "-noout", "-ext",
               "subjectAltName,basicConstraints,keyUsage,extendedKeyUsage,subjectKeyIdentifier,"
               "authorityKeyIdentifier",
               "-in", dir / "tls.crt"});
  EXPECT_THAT(leaf_text, HasSubstr("CA:FALSE"));
  EXPECT_THAT(leaf_text, HasSubstr("X509v3 Key Usage: critical"));
  EXPECT_THAT(leaf_text, HasSubstr("Digital Signature"));
  const bool rsa = pair.leaf.key.Describe().algorithm == "rsa";
  EXPECT_EQ(leaf_text.find("Key Encipherment") != std::string::npos, rsa) << leaf_text;
  EXPECT_THAT(leaf_text, HasSubstr("TLS Web Server Authentication"));
  EXPECT_THAT(leaf_text, Not(HasSubstr("TLS Web Client Authentication")));
  EXPECT_THAT(leaf_text, HasSubstr(kSanText));  // contract order, nothing in between
  EXPECT_THAT(leaf_text, HasSubstr("IP Address:10.0.0.7"));
  EXPECT_THAT(leaf_text, ::testing::MatchesRegex("(.|\n)*IP Address:(FD00|fd00)(.|\n)*"));
  EXPECT_THAT(leaf_text, HasSubstr("X509v3 Subject Key Identifier"));
  // The leaf's AKI is the CA's SKI.
  const std::string ca_ski = Line(ca_text, "X509v3 Subject Key Identifier: \n    ");
  ASSERT_FALSE(ca_ski.empty()) << ca_text;
  EXPECT_THAT(leaf_text, HasSubstr("X509v3 Authority Key Identifier: \n    " + ca_ski));

  // Our keys are unencrypted PKCS#8 that the CLI reads.
  EXPECT_THAT(dir.Read("tls.key"), StartsWith("-----BEGIN PRIVATE KEY-----\n"));
  Openssl({"pkey", "-in", dir / "tls.key", "-noout"});
  Openssl({"pkey", "-in", dir / "ca.key", "-noout"});
  const std::string key_public = Openssl({"pkey", "-in", dir / "tls.key", "-pubout"});
  const std::string cert_public = Openssl({"x509", "-in", dir / "tls.crt", "-noout", "-pubkey"});
  EXPECT_EQ(key_public, cert_public);
}

TEST_P(PkiOracle, OpensslAgreesWithInfo) {
  const Pair pair = MustPair(GetParam());
  TempDir dir;
  WritePair(dir, pair);
  for (const char* name : {"ca.crt", "tls.crt"}) {
    const Certificate& cert =
        std::string(name) == "ca.crt" ? pair.ca.certificate : pair.leaf.certificate;
    const CertificateInfo info = cert.Info();
    const std::string out = Openssl({"x509", "-noout", "-serial", "-dates", "-subject", "-issuer",
                                     "-nameopt", "RFC2253", "-in", dir / name});
    EXPECT_EQ(NormalizeSerial(Line(out, "serial=")), NormalizeSerial(info.serial_hex)) << name;
    EXPECT_EQ(Line(out, "notBefore="), OpensslDate(info.not_before)) << name;
    EXPECT_EQ(Line(out, "notAfter="), OpensslDate(info.not_after)) << name;
    EXPECT_EQ(Line(out, "subject="), info.subject) << name;
    EXPECT_EQ(Line(out, "issuer="), info.issuer) << name;
    const std::string text = Openssl({"x509", "-noout", "-text", "-in", dir / name});
    EXPECT_THAT(text, HasSubstr("Signature Algorithm: " + info.signature_algorithm)) << name;
  }
  EXPECT_EQ(pair.leaf.certificate.Info().key.name, KeyTypeName(GetParam()));
  EXPECT_EQ(pair.ca.certificate.Info().key.name, KeyTypeName(GetParam()));
}

TEST_P(PkiOracle, OurValidateAgrees) {
  const Pair pair = MustPair(GetParam());
  PairSource source;
  source.ca_pem = pair.ca.certificate.ToPem();
  source.cert_pem = pair.leaf.certificate.ToPem();
  source.key_pem = KeyPem(pair.leaf.key);
  source.ca_key_pem = KeyPem(pair.ca.key);
  ValidationPolicy policy;
  policy.dns_names = {"svc.ns.svc", "svc", "svc.ns", "svc.ns.svc.cluster.local"};
  policy.ip_addresses = {"10.0.0.7", "fd00::1"};
  const ValidationReport report = Validate(source, policy, std::chrono::system_clock::now());
  EXPECT_TRUE(report.ok()) << (report.ok() ? "" : report.findings[0].finding.message);
}

INSTANTIATE_TEST_SUITE_P(KeyTypes, PkiOracle, ::testing::ValuesIn(AllKeyTypes()),
                         [](const ::testing::TestParamInfo<KeyType>& param) {
                           std::string name(KeyTypeName(param.param));
                           for (char& c : name) {
                             c = c == '-' ? '_' : c;
                           }
                           return name;
                         });

// --- The other direction: what the CLI makes, we read. ---

TEST(PkiOracleCli, ReadsACliSelfSignedRsaCertificate) {
  TempDir dir;
  Openssl({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", dir / "key.pem", "-out",
           dir / "cert.pem", "-days", "30", "-subj", "/O=acme/CN=cli.example", "-addext",
           "subjectAltName=DNS:cli.example,DNS:*.cli.example,IP:192.0.2.1,IP:2001:db8::1"});
  auto cert = Certificate::FromPem(dir.Read("cert.pem"));
  ASSERT_TRUE(cert.has_value()) << cert.error().message();
  const CertificateInfo info = cert->Info();
  EXPECT_EQ(info.subject, "CN=cli.example,O=acme");
  EXPECT_EQ(info.common_name, "cli.example");
  EXPECT_THAT(info.dns_names, ElementsAre("cli.example", "*.cli.example"));
  EXPECT_THAT(info.ip_addresses, ElementsAre("192.0.2.1", "2001:db8::1"));
  EXPECT_EQ(info.key.name, "rsa-2048");
  EXPECT_EQ(info.signature_algorithm, "sha256WithRSAEncryption");
  EXPECT_TRUE(info.is_ca);  // the default openssl.cnf v3_ca section
  EXPECT_TRUE(info.self_signed);
  EXPECT_EQ(info.not_after - info.not_before, hours(24 * 30));
  const std::string serial = Openssl({"x509", "-noout", "-serial", "-in", dir / "cert.pem"});
  EXPECT_EQ(NormalizeSerial(Line(serial, "serial=")), NormalizeSerial(info.serial_hex));

  auto key = PrivateKey::FromPem(dir.Read("key.pem"));
  ASSERT_TRUE(key.has_value()) << key.error().message();
  EXPECT_TRUE(cert->MatchesKey(*key));
}

TEST(PkiOracleCli, ReadsSec1EcKeysWithAndWithoutParameters) {
  const std::string with_parameters = Openssl({"ecparam", "-name", "prime256v1", "-genkey"});
  ASSERT_THAT(with_parameters, HasSubstr("-----BEGIN EC PARAMETERS-----"));
  ASSERT_THAT(with_parameters, HasSubstr("-----BEGIN EC PRIVATE KEY-----"));
  auto p256 = PrivateKey::FromPem(with_parameters);
  ASSERT_TRUE(p256.has_value()) << p256.error().message();
  EXPECT_EQ(p256->Describe().name, "ecdsa-p256");

  const std::string bare = Openssl({"ecparam", "-name", "secp384r1", "-genkey", "-noout"});
  ASSERT_THAT(bare, StartsWith("-----BEGIN EC PRIVATE KEY-----"));
  auto p384 = PrivateKey::FromPem(bare);
  ASSERT_TRUE(p384.has_value()) << p384.error().message();
  EXPECT_EQ(p384->Describe().name, "ecdsa-p384");
  // Re-encoded as PKCS#8, the CLI sees the same public key.
  const std::string pkcs8 = KeyPem(*p384);
  EXPECT_THAT(pkcs8, StartsWith("-----BEGIN PRIVATE KEY-----"));
  EXPECT_EQ(Openssl({"pkey", "-pubout"}, pkcs8), Openssl({"pkey", "-pubout"}, bare));
}

TEST(PkiOracleCli, ReadsPkcs1RsaKeys) {
  const std::string pem = Openssl({"genrsa", "-traditional", "2048"});
  ASSERT_THAT(pem, StartsWith("-----BEGIN RSA PRIVATE KEY-----"));
  auto key = PrivateKey::FromPem(pem);
  ASSERT_TRUE(key.has_value()) << key.error().message();
  const KeyDescription description = key->Describe();
  EXPECT_EQ(description.algorithm, "rsa");
  EXPECT_EQ(description.bits, 2048);
  EXPECT_EQ(description.name, "rsa-2048");
  EXPECT_EQ(Openssl({"pkey", "-pubout"}, KeyPem(*key)), Openssl({"pkey", "-pubout"}, pem));
}

TEST(PkiOracleCli, ReadsEd25519Keys) {
  const std::string pem = Openssl({"genpkey", "-algorithm", "ed25519"});
  auto key = PrivateKey::FromPem(pem);
  ASSERT_TRUE(key.has_value()) << key.error().message();
  EXPECT_EQ(key->Describe().algorithm, "ed25519");
  EXPECT_EQ(key->Describe().name, "ed25519");
  EXPECT_TRUE(key->Describe().curve.empty());
}

TEST(PkiOracleCli, DescribesKeysCertctlWouldNeverMake) {
  auto p521 = PrivateKey::FromPem(Openssl({"ecparam", "-name", "secp521r1", "-genkey", "-noout"}));
  ASSERT_TRUE(p521.has_value()) << p521.error().message();
  EXPECT_EQ(p521->Describe().curve, "P-521");
  EXPECT_EQ(p521->Describe().name, "ecdsa-p521");

  auto k1 = PrivateKey::FromPem(Openssl({"ecparam", "-name", "secp256k1", "-genkey", "-noout"}));
  ASSERT_TRUE(k1.has_value()) << k1.error().message();
  EXPECT_EQ(k1->Describe().curve, "secp256k1");
  EXPECT_EQ(k1->Describe().name, "ecdsa-secp256k1");

  TempDir dir;
  Openssl({"genpkey", "-genparam", "-algorithm", "DSA", "-pkeyopt", "dsa_paramgen_bits:1024",
           "-out", dir / "dsa.param"});
  auto dsa = PrivateKey::FromPem(Openssl({"genpkey", "-paramfile", dir / "dsa.param"}));
  ASSERT_TRUE(dsa.has_value()) << dsa.error().message();
  EXPECT_EQ(dsa->Describe().algorithm, "dsa");
  EXPECT_EQ(dsa->Describe().name, "dsa-1024");
}

TEST(PkiOracleCli, CliMadeCaAndLeafValidate) {
  TempDir dir;
  Openssl({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", dir / "ca.key", "-out",
           dir / "ca.crt", "-days", "3650", "-subj", "/CN=cli-ca", "-addext",
           "basicConstraints=critical,CA:TRUE", "-addext",
           "keyUsage=critical,keyCertSign,cRLSign"});
  Openssl({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", dir / "tls.key", "-out", dir / "tls.csr", "-subj", "/CN=svc.ns.svc"});
  dir.Write("leaf.ext",
            "basicConstraints=CA:FALSE\n"
            "keyUsage=critical,digitalSignature\n"
            "extendedKeyUsage=serverAuth\n"
            "subjectAltName=DNS:svc.ns.svc,DNS:svc,IP:10.0.0.7\n");
  Openssl({"x509", "-req", "-in", dir / "tls.csr", "-CA", dir / "ca.crt", "-CAkey", dir / "ca.key",
           "-CAcreateserial", "-days", "365", "-extfile", dir / "leaf.ext", "-out",
           dir / "tls.crt"});
  PairSource source;
  source.ca_pem = dir.Read("ca.crt");
  source.cert_pem = dir.Read("tls.crt");
  source.key_pem = dir.Read("tls.key");
  source.ca_key_pem = dir.Read("ca.key");
  ValidationPolicy policy;
  policy.dns_names = {"svc.ns.svc", "svc"};
  policy.ip_addresses = {"10.0.0.7"};
  const ValidationReport report =
      Validate(source, policy, std::chrono::system_clock::now() + std::chrono::minutes(1));
  EXPECT_TRUE(report.ok()) << (report.ok() ? "" : report.findings[0].finding.message);
  EXPECT_EQ(report.issuer_index, 0u);
  ASSERT_TRUE(report.leaf.has_value());
  EXPECT_EQ(report.leaf->key.name, "ecdsa-p256");
  EXPECT_EQ(report.ca[0].key.name, "rsa-2048");
}

TEST(PkiOracleCli, Ed25519CliCaIssuesALeafBothSidesAccept) {
  TempDir dir;
  Openssl({"req", "-x509", "-newkey", "ed25519", "-nodes", "-keyout", dir / "ca.key", "-out",
           dir / "ca.crt", "-days", "3650", "-subj", "/CN=ed-ca", "-addext",
           "basicConstraints=critical,CA:TRUE", "-addext",
           "keyUsage=critical,keyCertSign,cRLSign"});
  auto ca_cert = Certificate::FromPem(dir.Read("ca.crt"));
  auto ca_key = PrivateKey::FromPem(dir.Read("ca.key"));
  ASSERT_TRUE(ca_cert.has_value()) << ca_cert.error().message();
  ASSERT_TRUE(ca_key.has_value()) << ca_key.error().message();
  const KeyPair ca{*ca_cert, *ca_key};
  LeafRequest request;
  request.dns_names = {"svc.ns.svc"};
  const TimePoint now = std::chrono::system_clock::now();
  auto leaf = IssueLeaf(request, ca, now);
  ASSERT_TRUE(leaf.has_value()) << leaf.error().message();
  EXPECT_EQ(leaf->certificate.Info().signature_algorithm, "ED25519");
  dir.Write("tls.crt", leaf->certificate.ToPem());
  EXPECT_THAT(
      Openssl({"verify", "-CAfile", dir / "ca.crt", "-purpose", "sslserver", dir / "tls.crt"}),
      HasSubstr(": OK"));

  PairSource source;
  source.ca_pem = ca_cert->ToPem();
  source.cert_pem = leaf->certificate.ToPem();
  source.key_pem = KeyPem(leaf->key);
  ValidationPolicy policy;
  policy.dns_names = {"svc.ns.svc"};
  const ValidationReport report = Validate(source, policy, now);
  EXPECT_TRUE(report.ok()) << (report.ok() ? "" : report.findings[0].finding.message);
}

TEST(PkiOracleCli, OpensslRejectsALeafFromAnotherCaLikeWeDo) {
  const Pair mine = MustPair(KeyType::kEcdsaP256);
  const Pair other = MustPair(KeyType::kEcdsaP256);
  TempDir dir;
  dir.Write("ca.crt", mine.ca.certificate.ToPem());
  dir.Write("tls.crt", other.leaf.certificate.ToPem());
  const auto result = RunProcess(
      {"openssl", "verify", "-CAfile", dir / "ca.crt", "-purpose", "sslserver", dir / "tls.crt"});
  EXPECT_NE(result.exit_code, 0);
  EXPECT_THAT(result.out + result.err, HasSubstr("unable to get local issuer certificate"));

  PairSource source;
  source.ca_pem = mine.ca.certificate.ToPem();
  source.cert_pem = other.leaf.certificate.ToPem();
  source.key_pem = KeyPem(other.leaf.key);
  const ValidationReport report =
      Validate(source, ValidationPolicy{}, std::chrono::system_clock::now());
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings[0].finding.code, FindingCode::kUntrustedChain);
  EXPECT_THAT(report.findings[0].finding.message,
              AllOf(HasSubstr("unable to get local issuer certificate"), HasSubstr("ca.crt")));
}

}  // namespace
}  // namespace openssl_oracle_test
}  // namespace certctl::pki
