#include "certctl/pki/certificate.h"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/pki/issue.h"
#include "certctl/pki/key.h"

#include "fakes/fake_clock.h"
#include "support/process.h"
#include "support/test_pki.h"

namespace certctl::pki {
namespace certificate_test {
namespace {

using certctl::testing::CaBuilder;
using certctl::testing::FakeClock;
using certctl::testing::LeafBuilder;
using certctl::testing::Openssl;
using std::chrono::hours;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;

const TimePoint kNow = FakeClock().Now();

KeyPair MustCa(KeyType type = KeyType::kEcdsaP256, std::string name = "webhook-ca") {
  return CaBuilder(std::move(name))
      .At(kNow)
      .Organization("acme")
      .Key(type)
      .Validity(hours(24 * 365 * 10))
      .Build();
}

KeyPair MustLeaf(const KeyPair& ca) {
  return LeafBuilder(ca)
      .At(kNow)
      .DnsNames({"svc.ns.svc", "svc", "svc.ns", "svc.ns.svc.cluster.local"})
      .IpAddresses({"10.0.0.7", "fd00::1"})
      .Build();
}

TEST(PkiCertificate, InfoDescribesTheCa) {
  const KeyPair ca = MustCa();
  const CertificateInfo info = ca.certificate.Info();
  EXPECT_EQ(info.subject, "CN=webhook-ca,O=acme");
  EXPECT_EQ(info.issuer, "CN=webhook-ca,O=acme");
  EXPECT_EQ(info.common_name, "webhook-ca");
  EXPECT_TRUE(info.is_ca);
  ASSERT_TRUE(info.path_length.has_value());
  EXPECT_EQ(*info.path_length, 0);
  EXPECT_TRUE(info.self_signed);
  EXPECT_EQ(info.key.name, "ecdsa-p256");
  EXPECT_EQ(info.signature_algorithm, "ecdsa-with-SHA256");
  EXPECT_TRUE(info.dns_names.empty());
  EXPECT_TRUE(info.ip_addresses.empty());
  EXPECT_EQ(info.not_before, std::chrono::floor<std::chrono::seconds>(kNow) - hours(1));
  EXPECT_EQ(info.not_after, kNow + CaRequest{}.validity);
  EXPECT_THAT(info.serial_hex, MatchesRegex("[0-9a-f]+"));
  EXPECT_NE(info.serial_hex[0], '0');
  EXPECT_THAT(info.sha256_fingerprint, MatchesRegex("([0-9A-F]{2}:){31}[0-9A-F]{2}"));
}

TEST(PkiCertificate, InfoDescribesTheLeaf) {
  const KeyPair ca = MustCa();
  const CertificateInfo info = MustLeaf(ca).certificate.Info();
  EXPECT_EQ(info.subject, "CN=svc.ns.svc");
  EXPECT_EQ(info.issuer, "CN=webhook-ca,O=acme");
  EXPECT_EQ(info.common_name, "svc.ns.svc");
  EXPECT_FALSE(info.is_ca);
  EXPECT_FALSE(info.path_length.has_value());
  EXPECT_FALSE(info.self_signed);
  EXPECT_THAT(info.dns_names,
              ElementsAre("svc.ns.svc", "svc", "svc.ns", "svc.ns.svc.cluster.local"));
  EXPECT_THAT(info.ip_addresses, ElementsAre("10.0.0.7", "fd00::1"));
  EXPECT_EQ(info.not_after, kNow + hours(24 * 90));
}

TEST(PkiCertificate, FingerprintAgreesWithOpenssl) {
  const KeyPair ca = MustCa();
  const std::string out =
      Openssl({"x509", "-noout", "-fingerprint", "-sha256"}, ca.certificate.ToPem());
  EXPECT_THAT(out, HasSubstr("=" + ca.certificate.Info().sha256_fingerprint));
}

TEST(PkiCertificate, P384CaIsSignedWithSha384) {
  const KeyPair ca = MustCa(KeyType::kEcdsaP384);
  EXPECT_EQ(ca.certificate.Info().signature_algorithm, "ecdsa-with-SHA384");
  EXPECT_EQ(ca.certificate.Info().key.name, "ecdsa-p384");
}

TEST(PkiCertificate, PemRoundTripsAndEqualityComparesEncoding) {
  const KeyPair ca = MustCa();
  const std::string pem = ca.certificate.ToPem();
  EXPECT_THAT(pem, StartsWith("-----BEGIN CERTIFICATE-----\n"));
  auto parsed = Certificate::FromPem(pem);
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message();
  EXPECT_TRUE(*parsed == ca.certificate);
  EXPECT_NE(parsed->get(), ca.certificate.get());
  EXPECT_FALSE(*parsed == MustCa().certificate);
}

TEST(PkiCertificate, MatchesKeyOnlyForItsOwnKey) {
  const KeyPair ca = MustCa();
  EXPECT_TRUE(ca.certificate.MatchesKey(ca.key));
  EXPECT_FALSE(ca.certificate.MatchesKey(MustCa().key));
  auto rsa = PrivateKey::Generate(KeyType::kRsa2048);
  ASSERT_TRUE(rsa.has_value());
  EXPECT_FALSE(ca.certificate.MatchesKey(*rsa));
}

TEST(PkiCertificate, FromPemRejectsEmptyInput) {
  auto cert = Certificate::FromPem("");
  ASSERT_FALSE(cert.has_value());
  EXPECT_EQ(cert.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(cert.error().message(), HasSubstr("empty input"));
}

TEST(PkiCertificate, FromPemRejectsGarbage) {
  auto cert = Certificate::FromPem("hello world\n");
  ASSERT_FALSE(cert.has_value());
  EXPECT_EQ(cert.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(cert.error().message(), HasSubstr("no PEM block found, expected a PEM certificate"));
}

TEST(PkiCertificate, FromPemRejectsTruncatedPem) {
  const std::string pem = MustCa().certificate.ToPem();
  auto cert = Certificate::FromPem(pem.substr(0, pem.size() - 40));
  ASSERT_FALSE(cert.has_value());
  EXPECT_EQ(cert.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(cert.error().message(), HasSubstr("truncated PEM"));
}

TEST(PkiCertificate, FromPemRejectsDamagedBlock) {
  std::string pem = MustCa().certificate.ToPem();
  pem.erase(pem.find('\n') + 1, 65);  // one whole base64 line gone: the DER is cut short
  auto cert = Certificate::FromPem(pem);
  ASSERT_FALSE(cert.has_value());
  EXPECT_EQ(cert.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(cert.error().message(), HasSubstr("cannot parse certificate 1"));
}

TEST(PkiCertificate, FromPemRejectsDerWithAHint) {
  const std::string der = Openssl({"x509", "-outform", "DER"}, MustCa().certificate.ToPem());
  auto cert = Certificate::FromPem(der);
  ASSERT_FALSE(cert.has_value());
  EXPECT_THAT(cert.error().message(), HasSubstr("looks like DER, expected a PEM certificate"));
}

TEST(PkiCertificate, FromPemRejectsAKey) {
  auto pem = MustCa().key.ToPem();
  ASSERT_TRUE(pem.has_value());
  auto cert = Certificate::FromPem(*pem);
  ASSERT_FALSE(cert.has_value());
  EXPECT_THAT(cert.error().message(), HasSubstr("no certificate found"));
  EXPECT_THAT(cert.error().message(), HasSubstr("PRIVATE KEY"));
}

TEST(PkiCertificate, FromPemRejectsMoreThanOneCertificate) {
  const std::string two = MustCa().certificate.ToPem() + MustCa().certificate.ToPem();
  auto cert = Certificate::FromPem(two);
  ASSERT_FALSE(cert.has_value());
  EXPECT_THAT(cert.error().message(), HasSubstr("found 2 certificates, expected exactly one"));
}

TEST(PkiCertificate, BundleKeepsOrderAndIgnoresTextBetweenBlocks) {
  const KeyPair first = MustCa(KeyType::kEcdsaP256, "first-ca");
  const KeyPair second = MustCa(KeyType::kEcdsaP256, "second-ca");
  const std::string pem = "# current\n" + first.certificate.ToPem() + "\nsubject=old one\n" +
                          second.certificate.ToPem() + "trailing words\n";
  auto bundle = ParseCertificateBundle(pem);
  ASSERT_TRUE(bundle.has_value()) << bundle.error().message();
  ASSERT_EQ(bundle->size(), 2u);
  EXPECT_EQ((*bundle)[0].Info().common_name, "first-ca");
  EXPECT_EQ((*bundle)[1].Info().common_name, "second-ca");
}

TEST(PkiCertificate, BundleEncodesAndParsesBack) {
  const std::vector<Certificate> certificates = {MustCa().certificate, MustCa().certificate};
  const std::string pem = EncodeCertificateBundle(certificates);
  auto bundle = ParseCertificateBundle(pem);
  ASSERT_TRUE(bundle.has_value()) << bundle.error().message();
  ASSERT_EQ(bundle->size(), 2u);
  EXPECT_TRUE((*bundle)[0] == certificates[0]);
  EXPECT_TRUE((*bundle)[1] == certificates[1]);
  EXPECT_EQ(EncodeCertificateBundle({}), "");
}

TEST(PkiCertificate, BundleRejectsADamagedSecondBlock) {
  std::string second = MustCa().certificate.ToPem();
  second.erase(second.find('\n') + 1, 65);
  auto bundle = ParseCertificateBundle(MustCa().certificate.ToPem() + second);
  ASSERT_FALSE(bundle.has_value());
  EXPECT_THAT(bundle.error().message(), HasSubstr("cannot parse certificate 2"));
}

TEST(PkiCertificate, BundleRejectsNoBlockAtAll) {
  auto bundle = ParseCertificateBundle("\n\n");
  ASSERT_FALSE(bundle.has_value());
  EXPECT_EQ(bundle.error().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace certificate_test
}  // namespace certctl::pki
