#include "certctl/pki/validate.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include "certctl/pki/issue.h"
#include "certctl/util/duration.h"

#include "fakes/fake_clock.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "support/test_pki.h"

namespace certctl::pki {
namespace validate_test {
namespace {

using certctl::testing::BundlePem;
using certctl::testing::CaBuilder;
using certctl::testing::FakeClock;
using certctl::testing::KeyPem;
using certctl::testing::LeafBuilder;
using certctl::testing::Openssl;
using certctl::testing::TempDir;
using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::AllOf;
using ::testing::HasSubstr;

const TimePoint kNow = FakeClock().Now();
constexpr hours kDay{24};

KeyPair MustCa(TimePoint now = kNow, std::string name = "webhook-ca",
               seconds validity = 10 * 365 * kDay, KeyType type = KeyType::kEcdsaP256) {
  return CaBuilder(std::move(name)).At(now).Validity(validity).Key(type).Build();
}

KeyPair MustLeaf(const KeyPair& ca, TimePoint now = kNow, seconds validity = 365 * kDay,
                 KeyType type = KeyType::kEcdsaP256,
                 std::vector<std::string> dns_names = {"svc.ns.svc", "svc", "svc.ns",
                                                       "svc.ns.svc.cluster.local"}) {
  return LeafBuilder(ca)
      .At(now)
      .Validity(validity)
      .Key(type)
      .DnsNames(std::move(dns_names))
      .IpAddresses({"10.0.0.7", "fd00::1"})
      .Build();
}

PairSource Source(const std::vector<const KeyPair*>& cas, const KeyPair& leaf,
                  const KeyPair* ca_key = nullptr) {
  PairSource source;
  source.ca_pem = BundlePem(cas);
  source.cert_pem = leaf.certificate.ToPem();
  source.key_pem = KeyPem(leaf.key);
  if (ca_key != nullptr) {
    source.ca_key_pem = KeyPem(ca_key->key);
  }
  return source;
}

PairSource Source(const KeyPair& ca, const KeyPair& leaf) { return Source({&ca}, leaf, &ca); }

ValidationPolicy Policy() {
  ValidationPolicy policy;
  policy.dns_names = {"svc.ns.svc", "svc", "svc.ns", "svc.ns.svc.cluster.local"};
  policy.ip_addresses = {"10.0.0.7"};
  return policy;
}

std::string Dump(const ValidationReport& report) {
  std::string out;
  for (const PartFinding& finding : report.findings) {
    out += std::string(FindingCodeName(finding.finding.code)) + " [" + finding.finding.object +
           "] " + finding.finding.message + "\n";
  }
  return out;
}

std::vector<PartFinding> With(const ValidationReport& report, FindingCode code) {
  std::vector<PartFinding> out;
  for (const PartFinding& finding : report.findings) {
    if (finding.finding.code == code) {
      out.push_back(finding);
    }
  }
  return out;
}

// A leaf made by the openssl CLI from a fresh key, signed by `ca`, with `extensions` in
// openssl.cnf syntax. Valid from the real current time for a year.
struct CliLeaf {
  std::string cert_pem;
  std::string key_pem;
};

CliLeaf MakeCliLeaf(const KeyPair& ca, const std::string& extensions,
                    const std::vector<std::string>& new_key = {"-newkey", "ec", "-pkeyopt",
                                                               "ec_paramgen_curve:P-256"},
                    const std::vector<std::string>& sign_options = {}) {
  TempDir dir;
  dir.Write("ca.crt", ca.certificate.ToPem());
  dir.Write("ca.key", KeyPem(ca.key));
  dir.Write("leaf.ext", extensions);
  std::vector<std::string> request = {
      "req",  "-new",           "-nodes", "-keyout",       dir / "leaf.key",
      "-out", dir / "leaf.csr", "-subj",  "/CN=svc.ns.svc"};
  request.insert(request.end(), new_key.begin(), new_key.end());
  Openssl(request);
  std::vector<std::string> sign = {"x509",        "-req",           "-in",    dir / "leaf.csr",
                                   "-CA",         dir / "ca.crt",   "-CAkey", dir / "ca.key",
                                   "-set_serial", "0x7b2a",         "-days",  "365",
                                   "-extfile",    dir / "leaf.ext", "-out",   dir / "leaf.crt"};
  sign.insert(sign.end(), sign_options.begin(), sign_options.end());
  Openssl(sign);
  return CliLeaf{dir.Read("leaf.crt"), dir.Read("leaf.key")};
}

constexpr char kServerExtensions[] =
    "basicConstraints=critical,CA:FALSE\n"
    "keyUsage=critical,digitalSignature,keyEncipherment\n"
    "extendedKeyUsage=serverAuth\n"
    "subjectAltName=DNS:svc.ns.svc,DNS:svc,DNS:svc.ns,DNS:svc.ns.svc.cluster.local,IP:10.0.0.7\n";

// A self-signed CA made by the openssl CLI; `options` add to `openssl req -x509`.
KeyPair MakeCliCa(const std::vector<std::string>& options) {
  TempDir dir;
  std::vector<std::string> args = {"req",          "-x509", "-nodes",       "-keyout",
                                   dir / "ca.key", "-out",  dir / "ca.crt", "-days",
                                   "3650",         "-subj", "/CN=cli-ca"};
  args.insert(args.end(), options.begin(), options.end());
  Openssl(args);
  auto cert = Certificate::FromPem(dir.Read("ca.crt"));
  auto key = PrivateKey::FromPem(dir.Read("ca.key"));
  EXPECT_TRUE(cert.has_value()) << cert.error().message();
  EXPECT_TRUE(key.has_value()) << key.error().message();
  return KeyPair{*cert, *key};
}

// The openssl CLI stamps real time; validate a minute later so its notBefore has passed.
TimePoint RealNow() { return std::chrono::system_clock::now() + minutes(1); }

TEST(PkiValidate, HealthyPairHasNoFindings) {
  const KeyPair ca = MustCa();
  const KeyPair leaf = MustLeaf(ca);
  const ValidationReport report = Validate(Source(ca, leaf), Policy(), kNow + kDay);
  EXPECT_TRUE(report.ok()) << Dump(report);
  EXPECT_TRUE(report.CaOk());
  EXPECT_TRUE(report.LeafOk());
  EXPECT_TRUE(report.AllFindings().empty());
  ASSERT_EQ(report.ca.size(), 1u);
  EXPECT_EQ(report.ca[0].common_name, "webhook-ca");
  ASSERT_TRUE(report.leaf.has_value());
  EXPECT_EQ(report.leaf->common_name, "svc.ns.svc");
  EXPECT_EQ(report.issuer_index, 0u);
}

TEST(PkiValidate, HealthyRightAfterIssuanceAndWithIpv6InAnotherSpelling) {
  const KeyPair ca = MustCa();
  const KeyPair leaf = MustLeaf(ca);
  ValidationPolicy policy = Policy();
  policy.ip_addresses.push_back("FD00:0:0::1");
  const ValidationReport report = Validate(Source(ca, leaf), policy, kNow);
  EXPECT_TRUE(report.ok()) << Dump(report);
}

TEST(PkiValidate, RsaPairsValidate) {
  const KeyPair ca = MustCa(kNow, "rsa-ca", 10 * 365 * kDay, KeyType::kRsa2048);
  const KeyPair leaf = MustLeaf(ca, kNow, 365 * kDay, KeyType::kRsa3072);
  const ValidationReport report = Validate(Source(ca, leaf), Policy(), kNow + kDay);
  EXPECT_TRUE(report.ok()) << Dump(report);
}

TEST(PkiValidate, ALeafThatIsACaIsTheWrongUsage) {
  const KeyPair ca = MustCa();
  const KeyPair other = MustCa(kNow, "svc.ns.svc");  // a CA certificate served as the leaf
  const ValidationReport report = Validate(Source({&ca, &other}, other), Policy(), kNow + kDay);
  const std::vector<PartFinding> usage = With(report, FindingCode::kWrongUsage);
  EXPECT_TRUE(std::any_of(usage.begin(), usage.end(), [](const PartFinding& entry) {
    return entry.part == Part::kLeaf && entry.finding.message.find(
                                            "is a CA certificate (basicConstraints "
                                            "CA:TRUE)") != std::string::npos;
  })) << Dump(report);
}

TEST(PkiValidate, AbsentPartsAreMissing) {
  PairSource source;
  const ValidationReport report = Validate(source, Policy(), kNow);
  ASSERT_EQ(report.findings.size(), 3u) << Dump(report);
  EXPECT_EQ(report.findings[0].part, Part::kCa);
  EXPECT_EQ(report.findings[0].finding.object, "ca.crt");
  EXPECT_EQ(report.findings[1].part, Part::kLeaf);
  EXPECT_EQ(report.findings[1].finding.object, "tls.crt");
  EXPECT_EQ(report.findings[2].part, Part::kLeafKey);
  EXPECT_EQ(report.findings[2].finding.object, "tls.key");
  for (const PartFinding& finding : report.findings) {
    EXPECT_EQ(finding.finding.code, FindingCode::kMissing);
    EXPECT_THAT(finding.finding.message, HasSubstr("missing"));
  }
  EXPECT_TRUE(report.ca.empty());
  EXPECT_FALSE(report.leaf.has_value());
  EXPECT_FALSE(report.CaOk());
  EXPECT_FALSE(report.LeafOk());
}

TEST(PkiValidate, CaKeyIsOptional) {
  const KeyPair ca = MustCa();
  PairSource source = Source(ca, MustLeaf(ca));
  source.ca_key_pem.reset();
  EXPECT_TRUE(Validate(source, Policy(), kNow).ok());
}

TEST(PkiValidate, EmptyFileIsMissingAndNamedByItsLabel) {
  const KeyPair ca = MustCa();
  PairSource source = Source(ca, MustLeaf(ca));
  source.cert_pem = "";
  source.cert_label = "/etc/webhook/certs/tls.crt";
  const ValidationReport report = Validate(source, Policy(), kNow);
  ASSERT_EQ(report.findings.size(), 1u) << Dump(report);
  EXPECT_EQ(report.findings[0].part, Part::kLeaf);
  EXPECT_EQ(report.findings[0].finding.code, FindingCode::kMissing);
  EXPECT_EQ(report.findings[0].finding.object, "/etc/webhook/certs/tls.crt");
  EXPECT_EQ(report.findings[0].finding.message, "server certificate is empty");
  EXPECT_TRUE(report.CaOk());
  EXPECT_FALSE(report.LeafOk());
}

TEST(PkiValidate, GarbageTruncatedAndDerPartsAreUnparsableWithTheReason) {
  const KeyPair ca = MustCa();
  const KeyPair leaf = MustLeaf(ca);
  PairSource source = Source(ca, leaf);
  source.ca_pem = "not a certificate\n";
  const std::string cert = leaf.certificate.ToPem();
  source.cert_pem = cert.substr(0, cert.size() / 2);
  source.key_pem = Openssl({"pkey", "-outform", "DER"}, KeyPem(leaf.key));
  source.ca_key_pem = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
  const ValidationReport report = Validate(source, Policy(), kNow);
  ASSERT_EQ(report.findings.size(), 4u) << Dump(report);
  for (const PartFinding& finding : report.findings) {
    EXPECT_EQ(finding.finding.code, FindingCode::kUnparsable);
  }
  EXPECT_EQ(report.findings[0].part, Part::kCa);
  EXPECT_THAT(report.findings[0].finding.message,
              AllOf(HasSubstr("CA bundle"), HasSubstr("no PEM block found")));
  EXPECT_EQ(report.findings[1].part, Part::kLeaf);
  EXPECT_THAT(report.findings[1].finding.message, HasSubstr("truncated PEM"));
  EXPECT_EQ(report.findings[2].part, Part::kLeafKey);
  EXPECT_THAT(report.findings[2].finding.message, HasSubstr("looks like DER"));
  EXPECT_EQ(report.findings[3].part, Part::kCaKey);
  EXPECT_EQ(report.findings[3].finding.object, "ca.key");
}

TEST(PkiValidate, KeyOfAnotherCertificateIsAKeyMismatch) {
  const KeyPair ca = MustCa();
  const KeyPair leaf = MustLeaf(ca);
  PairSource source = Source(ca, leaf);
  source.key_pem = KeyPem(MustLeaf(ca).key);
  const ValidationReport report = Validate(source, Policy(), kNow);
  ASSERT_EQ(report.findings.size(), 1u) << Dump(report);
  const PartFinding& finding = report.findings[0];
  EXPECT_EQ(finding.part, Part::kLeafKey);
  EXPECT_EQ(finding.finding.code, FindingCode::kKeyMismatch);
  EXPECT_EQ(finding.finding.object, "tls.key");
  EXPECT_EQ(finding.finding.message,
            "the private key does not match server certificate \"svc.ns.svc\"");
  EXPECT_TRUE(report.CaOk());
}

TEST(PkiValidate, CaKeyOfAnotherCaIsAKeyMismatch) {
  const KeyPair ca = MustCa();
  const KeyPair other = MustCa(kNow, "other-ca");
  PairSource source = Source(ca, MustLeaf(ca));
  source.ca_key_pem = KeyPem(other.key);
  const ValidationReport report = Validate(source, Policy(), kNow);
  ASSERT_EQ(report.findings.size(), 1u) << Dump(report);
  const PartFinding& finding = report.findings[0];
  EXPECT_EQ(finding.part, Part::kCaKey);
  EXPECT_EQ(finding.finding.code, FindingCode::kKeyMismatch);
  EXPECT_EQ(finding.finding.object, "ca.key");
  EXPECT_THAT(finding.finding.message, HasSubstr("\"webhook-ca\""));
  EXPECT_FALSE(report.CaOk());
  EXPECT_TRUE(report.LeafOk());
}

TEST(PkiValidate, CertificateFromAnotherCaIsAnUntrustedChain) {
  const KeyPair ca = MustCa();
  const KeyPair other = MustCa(kNow, "other-ca");
  const KeyPair leaf = MustLeaf(other);
  const ValidationReport report = Validate(Source({&ca}, leaf, &ca), Policy(), kNow);
  ASSERT_EQ(report.findings.size(), 1u) << Dump(report);
  const PartFinding& finding = report.findings[0];
  EXPECT_EQ(finding.part, Part::kLeaf);
  EXPECT_EQ(finding.finding.code, FindingCode::kUntrustedChain);
  EXPECT_EQ(finding.finding.object, "tls.crt");
  EXPECT_THAT(finding.finding.message,
              HasSubstr("tls.crt \"svc.ns.svc\" is not signed by any CA in ca.crt "
                        "(unable to get local issuer certificate)"));
  EXPECT_THAT(finding.finding.message, HasSubstr("CN=other-ca"));
  EXPECT_FALSE(report.issuer_index.has_value());
}

TEST(PkiValidate, SelfSignedLeafIsAnUntrustedChain) {
  const KeyPair ca = MustCa();
  const KeyPair imposter = MustCa(kNow, "svc.ns.svc");
  PairSource source = Source(ca, MustLeaf(ca));
  source.cert_pem = imposter.certificate.ToPem();
  source.key_pem = KeyPem(imposter.key);
  const auto untrusted =
      With(Validate(source, ValidationPolicy{}, kNow), FindingCode::kUntrustedChain);
  ASSERT_EQ(untrusted.size(), 1u);
  EXPECT_THAT(untrusted[0].finding.message, HasSubstr("self-signed"));
}

TEST(PkiValidate, BundleEntryWithoutCaTrueIsNotACa) {
  const KeyPair ca = MustCa();
  const KeyPair leaf = MustLeaf(ca);
  const KeyPair stray = MustLeaf(ca, kNow, 365 * kDay, KeyType::kEcdsaP256, {"stray.example"});
  const ValidationReport report = Validate(Source({&ca, &stray}, leaf, &ca), Policy(), kNow);
  ASSERT_EQ(report.findings.size(), 1u) << Dump(report);
  const PartFinding& finding = report.findings[0];
  EXPECT_EQ(finding.part, Part::kCa);
  EXPECT_EQ(finding.finding.code, FindingCode::kNotACa);
  EXPECT_EQ(finding.finding.object, "ca.crt");
  EXPECT_THAT(finding.finding.message, HasSubstr("\"stray.example\" is not a CA"));
  EXPECT_EQ(report.issuer_index, 0u);
}

TEST(PkiValidate, CliCaWithCaFalseIsNotACaAndCannotAnchorTheLeaf) {
  const KeyPair fake_ca =
      MakeCliCa({"-newkey", "rsa:2048", "-addext", "basicConstraints=critical,CA:FALSE", "-addext",
                 "keyUsage=critical,keyCertSign,digitalSignature"});
  LeafRequest request;
  request.dns_names = {"svc.ns.svc"};
  auto refused = IssueLeaf(request, fake_ca, RealNow());
  ASSERT_FALSE(refused.has_value());
  EXPECT_THAT(refused.error().message(), HasSubstr("is not a CA"));
  const CliLeaf leaf = MakeCliLeaf(fake_ca, kServerExtensions);
  PairSource source;
  source.ca_pem = fake_ca.certificate.ToPem();
  source.cert_pem = leaf.cert_pem;
  source.key_pem = leaf.key_pem;
  const ValidationReport report = Validate(source, Policy(), RealNow());
  const auto not_ca = With(report, FindingCode::kNotACa);
  ASSERT_EQ(not_ca.size(), 1u) << Dump(report);
  EXPECT_EQ(not_ca[0].part, Part::kCa);
  EXPECT_THAT(not_ca[0].finding.message, HasSubstr("\"cli-ca\""));
  const auto untrusted = With(report, FindingCode::kUntrustedChain);
  ASSERT_EQ(untrusted.size(), 1u) << Dump(report);
  EXPECT_THAT(untrusted[0].finding.message, HasSubstr("cli-ca"));
  EXPECT_EQ(report.findings.size(), 2u) << Dump(report);
}

TEST(PkiValidate, CaWhoseKeyUsageLacksCertSignIsNotACa) {
  const KeyPair ca =
      MakeCliCa({"-newkey", "rsa:2048", "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
                 "keyUsage=critical,digitalSignature"});
  const KeyPair leaf = MustLeaf(ca, RealNow());
  const ValidationReport report = Validate(Source(ca, leaf), Policy(), RealNow());
  const auto not_ca = With(report, FindingCode::kNotACa);
  ASSERT_EQ(not_ca.size(), 1u) << Dump(report);
  EXPECT_THAT(not_ca[0].finding.message, HasSubstr("keyCertSign"));
}

TEST(PkiValidate, LeafForClientsOnlyIsWrongUsage) {
  const KeyPair ca = MustCa(RealNow());
  const CliLeaf leaf =
      MakeCliLeaf(ca,
                  "keyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n"
                  "subjectAltName=DNS:svc.ns.svc,DNS:svc,DNS:svc.ns,DNS:svc.ns.svc.cluster.local,"
                  "IP:10.0.0.7\n");
  PairSource source = Source(ca, MustLeaf(ca, RealNow()));
  source.cert_pem = leaf.cert_pem;
  source.key_pem = leaf.key_pem;
  const ValidationReport report = Validate(source, Policy(), RealNow());
  ASSERT_EQ(report.findings.size(), 1u) << Dump(report);
  EXPECT_EQ(report.findings[0].part, Part::kLeaf);
  EXPECT_EQ(report.findings[0].finding.code, FindingCode::kWrongUsage);
  EXPECT_THAT(report.findings[0].finding.message,
              AllOf(HasSubstr("\"svc.ns.svc\""), HasSubstr("serverAuth")));
}

TEST(PkiValidate, LeafWithoutDigitalSignatureIsWrongUsage) {
  const KeyPair ca = MustCa(RealNow());
  const CliLeaf leaf =
      MakeCliLeaf(ca,
                  "keyUsage=critical,keyEncipherment\nextendedKeyUsage=serverAuth\n"
                  "subjectAltName=DNS:svc.ns.svc,DNS:svc,DNS:svc.ns,"
                  "DNS:svc.ns.svc.cluster.local,IP:10.0.0.7\n",
                  {"-newkey", "rsa:2048"});
  PairSource source = Source(ca, MustLeaf(ca, RealNow()));
  source.cert_pem = leaf.cert_pem;
  source.key_pem = leaf.key_pem;
  const ValidationReport report = Validate(source, Policy(), RealNow());
  ASSERT_EQ(report.findings.size(), 1u) << Dump(report);
  EXPECT_EQ(report.findings[0].finding.code, FindingCode::kWrongUsage);
  EXPECT_THAT(report.findings[0].finding.message, HasSubstr("digitalSignature"));
}

TEST(PkiValidate, LeafWithoutUsageExtensionsIsAcceptedLikeGoAndOpenssl) {
  const KeyPair ca = MustCa(RealNow());
  const CliLeaf leaf =
      MakeCliLeaf(ca,
                  "subjectAltName=DNS:svc.ns.svc,DNS:svc,DNS:svc.ns,DNS:svc.ns.svc.cluster.local,"
                  "IP:10.0.0.7\n");
  PairSource source = Source(ca, MustLeaf(ca, RealNow()));
  source.cert_pem = leaf.cert_pem;
  source.key_pem = leaf.key_pem;
  const ValidationReport report = Validate(source, Policy(), RealNow());
  EXPECT_TRUE(report.ok()) << Dump(report);
}

TEST(PkiValidate, Rsa1024CaIsAWeakKey) {
  const KeyPair ca =
      MakeCliCa({"-newkey", "rsa:1024", "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
                 "keyUsage=critical,keyCertSign,cRLSign"});
  const KeyPair leaf = MustLeaf(ca, RealNow());
  const ValidationReport report = Validate(Source(ca, leaf), Policy(), RealNow());
  ASSERT_EQ(report.findings.size(), 1u) << Dump(report);
  EXPECT_EQ(report.findings[0].part, Part::kCa);
  EXPECT_EQ(report.findings[0].finding.code, FindingCode::kWeakKey);
  EXPECT_EQ(report.findings[0].finding.object, "ca.crt");
  EXPECT_THAT(report.findings[0].finding.message,
              AllOf(HasSubstr("\"cli-ca\""), HasSubstr("rsa-1024")));
}

TEST(PkiValidate, Rsa1024LeafIsAWeakKey) {
  const KeyPair ca = MustCa(RealNow());
  const CliLeaf leaf = MakeCliLeaf(ca, kServerExtensions, {"-newkey", "rsa:1024"});
  PairSource source = Source(ca, MustLeaf(ca, RealNow()));
  source.cert_pem = leaf.cert_pem;
  source.key_pem = leaf.key_pem;
  const ValidationReport report = Validate(source, Policy(), RealNow());
  ASSERT_EQ(report.findings.size(), 1u) << Dump(report);
  EXPECT_EQ(report.findings[0].part, Part::kLeaf);
  EXPECT_EQ(report.findings[0].finding.code, FindingCode::kWeakKey);
  EXPECT_THAT(report.findings[0].finding.message, HasSubstr("rsa-1024"));
}

TEST(PkiValidate, Secp256k1LeafIsAWeakKey) {
  const KeyPair ca = MustCa(RealNow());
  const CliLeaf leaf = MakeCliLeaf(ca, kServerExtensions,
                                   {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:secp256k1"});
  PairSource source = Source(ca, MustLeaf(ca, RealNow()));
  source.cert_pem = leaf.cert_pem;
  source.key_pem = leaf.key_pem;
  const auto weak = With(Validate(source, Policy(), RealNow()), FindingCode::kWeakKey);
  ASSERT_EQ(weak.size(), 1u);
  EXPECT_THAT(weak[0].finding.message, HasSubstr("secp256k1"));
}

TEST(PkiValidate, Sha1SignedCaIsAWeakSignature) {
  const KeyPair ca =
      MakeCliCa({"-sha1", "-newkey", "rsa:2048", "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign"});
  ASSERT_EQ(ca.certificate.Info().signature_algorithm, "sha1WithRSAEncryption");
  const KeyPair leaf = MustLeaf(ca, RealNow());
  const ValidationReport report = Validate(Source(ca, leaf), Policy(), RealNow());
  ASSERT_EQ(report.findings.size(), 1u) << Dump(report);
  EXPECT_EQ(report.findings[0].part, Part::kCa);
  EXPECT_EQ(report.findings[0].finding.code, FindingCode::kWeakSignature);
  EXPECT_THAT(
      report.findings[0].finding.message,
      AllOf(HasSubstr("\"cli-ca\""), HasSubstr("sha1WithRSAEncryption"), HasSubstr("SHA-1")));
}

TEST(PkiValidate, Sha1SignedLeafIsAWeakSignature) {
  const KeyPair ca = MustCa(RealNow(), "rsa-ca", 365 * kDay, KeyType::kRsa2048);
  const CliLeaf leaf = MakeCliLeaf(
      ca, kServerExtensions, {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"}, {"-sha1"});
  PairSource source = Source(ca, MustLeaf(ca, RealNow()));
  source.cert_pem = leaf.cert_pem;
  source.key_pem = leaf.key_pem;
  const ValidationReport report = Validate(source, Policy(), RealNow());
  ASSERT_EQ(report.findings.size(), 1u) << Dump(report);
  EXPECT_EQ(report.findings[0].part, Part::kLeaf);
  EXPECT_EQ(report.findings[0].finding.code, FindingCode::kWeakSignature);
  EXPECT_EQ(report.findings[0].finding.object, "tls.crt");
}

TEST(PkiValidate, ExpiredLeafNamesTheDateAndHowLongAgo) {
  const KeyPair ca = MustCa();
  const KeyPair leaf = MustLeaf(ca, kNow, 90 * kDay);
  const ValidationReport report = Validate(Source(ca, leaf), Policy(), kNow + 100 * kDay);
  ASSERT_EQ(report.findings.size(), 1u) << Dump(report);
  const PartFinding& finding = report.findings[0];
  EXPECT_EQ(finding.part, Part::kLeaf);
  EXPECT_EQ(finding.finding.code, FindingCode::kExpired);
  EXPECT_EQ(finding.finding.message, "server certificate \"svc.ns.svc\" expired " +
                                         FormatRfc3339(kNow + 90 * kDay) + ", 10d ago");
  EXPECT_TRUE(report.CaOk());
}

TEST(PkiValidate, ExpiredCaAndItsClampedLeafAreBothExpired) {
  const KeyPair ca = MustCa(kNow, "short-ca", 30 * kDay);
  const KeyPair leaf = MustLeaf(ca);
  const ValidationReport report = Validate(Source(ca, leaf), Policy(), kNow + 31 * kDay);
  const auto expired = With(report, FindingCode::kExpired);
  ASSERT_EQ(expired.size(), 2u) << Dump(report);
  EXPECT_EQ(expired[0].part, Part::kCa);
  EXPECT_THAT(expired[0].finding.message, HasSubstr("\"short-ca\""));
  EXPECT_EQ(expired[1].part, Part::kLeaf);
  EXPECT_EQ(report.findings.size(), 2u) << Dump(report);
  EXPECT_TRUE(With(report, FindingCode::kUntrustedChain).empty());
}

TEST(PkiValidate, NotYetValidNamesTheStart) {
  const KeyPair ca = MustCa();
  const KeyPair leaf = MustLeaf(ca);
  const ValidationReport report = Validate(Source(ca, leaf), Policy(), kNow - hours(3));
  const auto early = With(report, FindingCode::kNotYetValid);
  ASSERT_EQ(early.size(), 2u) << Dump(report);
  EXPECT_EQ(early[0].part, Part::kCa);
  EXPECT_EQ(early[1].part, Part::kLeaf);
  EXPECT_EQ(early[1].finding.message, "server certificate \"svc.ns.svc\" is not valid before " +
                                          FormatRfc3339(kNow - hours(1)) + ", in 2h");
  EXPECT_EQ(report.findings.size(), 2u) << Dump(report);
}

TEST(PkiValidate, ExpiringSoonGivesTheDateAndTimeLeft) {
  const KeyPair ca = MustCa();
  const KeyPair leaf = MustLeaf(ca, kNow, 40 * kDay);
  const TimePoint at = kNow + 31 * kDay + hours(1);
  const ValidationReport report = Validate(Source(ca, leaf), Policy(), at);
  ASSERT_EQ(report.findings.size(), 1u) << Dump(report);
  const PartFinding& finding = report.findings[0];
  EXPECT_EQ(finding.part, Part::kLeaf);
  EXPECT_EQ(finding.finding.code, FindingCode::kExpiringSoon);
  EXPECT_EQ(finding.finding.message, "server certificate \"svc.ns.svc\" expires " +
                                         FormatRfc3339(kNow + 40 * kDay) +
                                         ", in 8d23h (renew-before 30d)");
}

TEST(PkiValidate, RenewBeforeBoundaryIsInclusive) {
  const KeyPair ca = MustCa();
  const KeyPair leaf = MustLeaf(ca, kNow, 40 * kDay);
  ValidationPolicy policy = Policy();
  policy.renew_before = 10 * kDay;
  EXPECT_TRUE(Validate(Source(ca, leaf), policy, kNow + 30 * kDay - seconds(1)).ok());
  const ValidationReport report = Validate(Source(ca, leaf), policy, kNow + 30 * kDay);
  ASSERT_EQ(report.findings.size(), 1u) << Dump(report);
  EXPECT_EQ(report.findings[0].finding.code, FindingCode::kExpiringSoon);
  EXPECT_THAT(report.findings[0].finding.message, HasSubstr("in 10d (renew-before 10d)"));
}

TEST(PkiValidate, ExpiringCaIsReportedOnTheCa) {
  const KeyPair ca = MustCa(kNow, "short-ca", 20 * kDay);
  const KeyPair leaf = MustLeaf(ca);
  const ValidationReport report = Validate(Source(ca, leaf), Policy(), kNow + kDay);
  const auto soon = With(report, FindingCode::kExpiringSoon);
  ASSERT_EQ(soon.size(), 2u) << Dump(report);
  EXPECT_EQ(soon[0].part, Part::kCa);
  EXPECT_EQ(soon[0].finding.object, "ca.crt");
  EXPECT_THAT(soon[0].finding.message, HasSubstr("in 19d"));
  EXPECT_EQ(soon[1].part, Part::kLeaf);
  EXPECT_FALSE(report.CaOk());
}

TEST(PkiValidate, MissingNamesAreEachNamed) {
  const KeyPair ca = MustCa();
  const KeyPair leaf = MustLeaf(ca);
  ValidationPolicy policy = Policy();
  policy.dns_names.push_back("other.ns.svc");
  policy.ip_addresses.push_back("10.0.0.9");
  policy.ip_addresses.push_back("not-an-ip");
  const ValidationReport report = Validate(Source(ca, leaf), policy, kNow);
  const auto missing = With(report, FindingCode::kSanMissing);
  ASSERT_EQ(missing.size(), 3u) << Dump(report);
  EXPECT_EQ(missing[0].part, Part::kLeaf);
  EXPECT_EQ(missing[0].finding.object, "tls.crt");
  EXPECT_EQ(missing[0].finding.message,
            "server certificate \"svc.ns.svc\" does not cover DNS name \"other.ns.svc\"");
  EXPECT_EQ(missing[1].finding.message,
            "server certificate \"svc.ns.svc\" does not cover IP address \"10.0.0.9\"");
  EXPECT_THAT(missing[2].finding.message, HasSubstr("\"not-an-ip\""));
  EXPECT_EQ(report.findings.size(), 3u);
}

TEST(PkiValidate, WildcardCoversExactlyOneLabel) {
  const KeyPair ca = MustCa();
  const KeyPair leaf = MustLeaf(ca, kNow, 365 * kDay, KeyType::kEcdsaP256, {"*.ns.svc"});
  ValidationPolicy policy;
  policy.dns_names = {"svc.ns.svc", "OTHER.ns.svc", "*.ns.svc"};
  EXPECT_TRUE(Validate(Source(ca, leaf), policy, kNow).ok());
  policy.dns_names = {"a.b.ns.svc", "ns.svc"};
  EXPECT_EQ(With(Validate(Source(ca, leaf), policy, kNow), FindingCode::kSanMissing).size(), 2u);
}

TEST(PkiValidate, SubjectCommonNameDoesNotCountAsAName) {
  const KeyPair ca = MustCa();
  const KeyPair leaf = MustLeaf(ca, kNow, 365 * kDay, KeyType::kEcdsaP256, {"first.example"});
  ValidationPolicy policy;
  policy.dns_names = {"first.example"};
  EXPECT_TRUE(Validate(Source(ca, leaf), policy, kNow).ok());
  // The CLI leaf below carries CN=svc.ns.svc but only another name as SAN.
  const KeyPair cli_ca = MustCa(RealNow());
  const CliLeaf cli = MakeCliLeaf(cli_ca, "subjectAltName=DNS:elsewhere.example\n");
  PairSource source = Source(cli_ca, MustLeaf(cli_ca, RealNow()));
  source.cert_pem = cli.cert_pem;
  source.key_pem = cli.key_pem;
  policy.dns_names = {"svc.ns.svc"};
  const ValidationReport report = Validate(source, policy, RealNow());
  ASSERT_EQ(report.findings.size(), 1u) << Dump(report);
  EXPECT_EQ(report.findings[0].finding.code, FindingCode::kSanMissing);
}

TEST(PkiValidate, LeafSignedByTheSecondCaOfTheBundle) {
  const KeyPair old_ca = MustCa(kNow, "old-ca");
  const KeyPair new_ca = MustCa(kNow, "new-ca");
  const KeyPair leaf = MustLeaf(new_ca);
  const ValidationReport report =
      Validate(Source({&old_ca, &new_ca}, leaf, &new_ca), Policy(), kNow + kDay);
  EXPECT_TRUE(report.ok()) << Dump(report);
  ASSERT_EQ(report.ca.size(), 2u);
  EXPECT_EQ(report.issuer_index, 1u);
  EXPECT_EQ(report.ca[1].common_name, "new-ca");
}

TEST(PkiValidate, ExpiredNonIssuingCaIsNotATimeFinding) {
  const KeyPair old_ca = MustCa(kNow, "old-ca", 10 * kDay);
  const TimePoint rotated = kNow + 5 * kDay;
  const KeyPair new_ca = MustCa(rotated, "new-ca");
  const KeyPair leaf = MustLeaf(new_ca, rotated);
  const ValidationReport report =
      Validate(Source({&old_ca, &new_ca}, leaf, &new_ca), Policy(), kNow + 20 * kDay);
  EXPECT_TRUE(report.ok()) << Dump(report);
  EXPECT_EQ(report.issuer_index, 1u);
}

TEST(PkiValidate, CaKeyOfNeitherTheIssuerNorTheFirstCaIsAMismatchNamingTheIssuer) {
  const KeyPair old_ca = MustCa(kNow, "old-ca");
  const KeyPair new_ca = MustCa(kNow, "new-ca");
  const KeyPair stranger = MustCa(kNow, "stranger-ca");
  const KeyPair leaf = MustLeaf(new_ca);
  const ValidationReport report =
      Validate(Source({&old_ca, &new_ca}, leaf, &stranger), Policy(), kNow);
  ASSERT_EQ(report.findings.size(), 1u) << Dump(report);
  EXPECT_EQ(report.findings[0].part, Part::kCaKey);
  EXPECT_EQ(report.findings[0].finding.code, FindingCode::kKeyMismatch);
  EXPECT_THAT(report.findings[0].finding.message, HasSubstr("\"new-ca\""));
}

// A rotation's first step: the incoming CA (first, with ca.key) is trusted next to the
// outgoing one, which still issued the leaf being served.
TEST(PkiValidate, CaKeyOfTheIncomingFirstCaIsAcceptedWhileTheLeafIsFromTheOutgoingOne) {
  const KeyPair outgoing = MustCa(kNow, "outgoing-ca");
  const KeyPair incoming = MustCa(kNow, "incoming-ca");
  const KeyPair leaf = MustLeaf(outgoing);
  const ValidationReport report =
      Validate(Source({&incoming, &outgoing}, leaf, &incoming), Policy(), kNow + kDay);
  EXPECT_TRUE(report.ok()) << Dump(report);
  EXPECT_EQ(report.issuer_index, 1u);
}

TEST(PkiValidate, LeafChainingToNeitherCaIsUntrustedAndEveryCaIsTimeChecked) {
  const KeyPair old_ca = MustCa(kNow, "old-ca", 10 * kDay);
  const KeyPair new_ca = MustCa(kNow, "new-ca");
  const KeyPair stranger = MustCa(kNow, "stranger-ca");
  const KeyPair leaf = MustLeaf(stranger);
  const ValidationReport report =
      Validate(Source({&old_ca, &new_ca}, leaf), Policy(), kNow + 20 * kDay);
  EXPECT_FALSE(report.issuer_index.has_value());
  const auto untrusted = With(report, FindingCode::kUntrustedChain);
  ASSERT_EQ(untrusted.size(), 1u) << Dump(report);
  EXPECT_EQ(untrusted[0].part, Part::kLeaf);
  const auto expired = With(report, FindingCode::kExpired);
  ASSERT_EQ(expired.size(), 1u) << Dump(report);
  EXPECT_EQ(expired[0].part, Part::kCa);
  EXPECT_THAT(expired[0].finding.message, HasSubstr("\"old-ca\""));
  EXPECT_EQ(report.findings.size(), 2u) << Dump(report);
}

TEST(PkiValidate, AnIntermediateAloneMayAnchorTheChainAsInGo) {
  TempDir dir;
  Openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", dir / "root.key", "-out", dir / "root.crt", "-subj", "/CN=root-ca", "-days",
           "3650", "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
           "keyUsage=critical,keyCertSign,cRLSign"});
  Openssl({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", dir / "int.key", "-out", dir / "int.csr", "-subj", "/CN=intermediate-ca"});
  dir.Write("int.ext",
            "basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\n");
  Openssl({"x509", "-req", "-in", dir / "int.csr", "-CA", dir / "root.crt", "-CAkey",
           dir / "root.key", "-set_serial", "0x10", "-days", "3650", "-extfile", dir / "int.ext",
           "-out", dir / "int.crt"});
  auto intermediate = Certificate::FromPem(dir.Read("int.crt"));
  auto intermediate_key = PrivateKey::FromPem(dir.Read("int.key"));
  ASSERT_TRUE(intermediate.has_value()) << intermediate.error().message();
  ASSERT_TRUE(intermediate_key.has_value()) << intermediate_key.error().message();
  const KeyPair ca{*intermediate, *intermediate_key};
  const KeyPair leaf = MustLeaf(ca, RealNow());

  const ValidationReport alone = Validate(Source(ca, leaf), Policy(), RealNow());
  EXPECT_TRUE(alone.ok()) << Dump(alone);
  EXPECT_EQ(alone.issuer_index, 0u);

  PairSource with_root = Source(ca, leaf);
  with_root.ca_pem = dir.Read("root.crt") + dir.Read("int.crt");
  const ValidationReport both = Validate(with_root, Policy(), RealNow());
  EXPECT_TRUE(both.ok()) << Dump(both);
  EXPECT_EQ(both.issuer_index, 1u);
}

TEST(PkiValidate, ExtraBlocksAfterTheLeafAreIgnored) {
  const KeyPair ca = MustCa();
  const KeyPair leaf = MustLeaf(ca);
  PairSource source = Source(ca, leaf);
  source.cert_pem = *source.cert_pem + ca.certificate.ToPem();
  const ValidationReport report = Validate(source, Policy(), kNow);
  EXPECT_TRUE(report.ok()) << Dump(report);
  EXPECT_EQ(report.leaf->common_name, "svc.ns.svc");
}

TEST(PkiValidate, FindingsSplitByPart) {
  const KeyPair ca = MustCa(kNow, "short-ca", 20 * kDay);
  const KeyPair leaf = MustLeaf(ca);
  PairSource source = Source(ca, leaf);
  source.key_pem = KeyPem(MustLeaf(ca).key);
  const ValidationReport report = Validate(source, Policy(), kNow);
  EXPECT_FALSE(report.CaOk());
  EXPECT_FALSE(report.LeafOk());
  EXPECT_EQ(report.AllFindings().size(), report.findings.size());
  for (const Finding& finding : report.AllFindings()) {
    EXPECT_THAT(finding.message, ::testing::Not(::testing::EndsWith(".")));
  }
}

// `ca` self-signed again with its validity replaced (GeneralizedTime text, "YYYYMMDDHHMMSSZ").
KeyPair Redated(const KeyPair& ca, const char* not_before, const char* not_after) {
  X509* cert = X509_dup(ca.certificate.get());
  EXPECT_NE(cert, nullptr);
  EXPECT_EQ(ASN1_TIME_set_string(X509_getm_notBefore(cert), not_before), 1);
  EXPECT_EQ(ASN1_TIME_set_string(X509_getm_notAfter(cert), not_after), 1);
  EXPECT_GT(X509_sign(cert, ca.key.get(), EVP_sha256()), 0);
  return KeyPair{Certificate(cert), ca.key};
}

// RFC 5280's "no well-defined expiration date", 99991231235959Z, is past the last second a
// TimePoint holds (2262): it saturates there instead of overflowing (found by fuzz/pem.cc).
TEST(PkiValidate, CaThatNeverExpiresIsValidUntilTheLastRepresentableSecond) {
  const KeyPair ca = Redated(MustCa(), "20250101000000Z", "99991231235959Z");
  const CertificateInfo info = ca.certificate.Info();
  EXPECT_EQ(info.not_after, std::chrono::floor<seconds>(TimePoint::max()));
  const KeyPair leaf = MustLeaf(ca);
  const ValidationReport report = Validate(Source(ca, leaf), Policy(), kNow);
  EXPECT_TRUE(report.ok()) << Dump(report);
}

// A notAfter centuries back saturates at 1677, further from now than nanoseconds reach: the
// time since expiry is still counted right (found by fuzz/pem.cc).
TEST(PkiValidate, CaThatExpiredCenturiesAgoSaysHowLongAgo) {
  const KeyPair ca = Redated(MustCa(), "15000101000000Z", "16000101000000Z");
  EXPECT_EQ(ca.certificate.Info().not_after, std::chrono::ceil<seconds>(TimePoint::min()));
  PairSource source;
  source.ca_pem = ca.certificate.ToPem();
  const auto expired = With(Validate(source, Policy(), kNow), FindingCode::kExpired);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].part, Part::kCa);
  EXPECT_EQ(expired[0].finding.message,
            "CA certificate \"webhook-ca\" expired 1677-09-21T00:12:44Z, 349y200d ago");
}

}  // namespace
}  // namespace validate_test
}  // namespace certctl::pki
