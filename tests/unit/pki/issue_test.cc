#include "certctl/pki/issue.h"

#include <chrono>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/bn.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "certctl/util/duration.h"

#include "fakes/fake_clock.h"

namespace certctl::pki {
namespace issue_test {
namespace {

using certctl::testing::FakeClock;
using std::chrono::hours;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const TimePoint kNow = FakeClock().Now();
constexpr hours kDay{24};

KeyPair MustCa(TimePoint now = kNow, std::chrono::seconds validity = hours(24 * 365)) {
  CaRequest request;
  request.common_name = "webhook-ca";
  request.validity = validity;
  auto ca = IssueCa(request, now);
  EXPECT_TRUE(ca.has_value()) << ca.error().message();
  return *ca;
}

LeafRequest Request() {
  LeafRequest request;
  request.dns_names = {"svc.ns.svc", "svc"};
  request.ip_addresses = {"10.0.0.7"};
  request.validity = 90 * kDay;
  return request;
}

TEST(PkiIssue, CaValidityStartsOneHourBackAndRunsForTheRequestedTime) {
  const KeyPair ca = MustCa(kNow, 10 * 365 * kDay);
  const CertificateInfo info = ca.certificate.Info();
  EXPECT_EQ(info.not_before, kNow - hours(1));
  EXPECT_EQ(info.not_after, kNow + 10 * 365 * kDay);
  EXPECT_TRUE(info.is_ca);
  EXPECT_TRUE(info.self_signed);
  EXPECT_TRUE(ca.certificate.MatchesKey(ca.key));
}

TEST(PkiIssue, CaCarriesTheContractExtensions) {
  const KeyPair ca = MustCa();
  X509* cert = ca.certificate.get();
  EXPECT_EQ(X509_get_version(cert), X509_VERSION_3);
  const std::uint32_t flags = X509_get_extension_flags(cert);
  EXPECT_NE(flags & EXFLAG_CA, 0u);
  EXPECT_NE(flags & EXFLAG_KUSAGE, 0u);
  EXPECT_EQ(X509_get_key_usage(cert), static_cast<std::uint32_t>(KU_KEY_CERT_SIGN | KU_CRL_SIGN));
  EXPECT_EQ(X509_get_pathlen(cert), 0);
  EXPECT_NE(X509_get0_subject_key_id(cert), nullptr);
  int critical = 0;
  EXPECT_NE(X509_get_ext_by_critical(cert, 1, -1), -1);
  BASIC_CONSTRAINTS* constraints = static_cast<BASIC_CONSTRAINTS*>(
      X509_get_ext_d2i(cert, NID_basic_constraints, &critical, nullptr));
  ASSERT_NE(constraints, nullptr);
  BASIC_CONSTRAINTS_free(constraints);
  EXPECT_EQ(critical, 1);
}

TEST(PkiIssue, LeafHasNamesInOrderAndCommonNameFromTheFirst) {
  const KeyPair ca = MustCa();
  auto leaf = IssueLeaf(Request(), ca, kNow);
  ASSERT_TRUE(leaf.has_value()) << leaf.error().message();
  const CertificateInfo info = leaf->certificate.Info();
  EXPECT_EQ(info.common_name, "svc.ns.svc");
  EXPECT_THAT(info.dns_names, ElementsAre("svc.ns.svc", "svc"));
  EXPECT_THAT(info.ip_addresses, ElementsAre("10.0.0.7"));
  EXPECT_EQ(info.issuer, ca.certificate.Info().subject);
  EXPECT_FALSE(info.is_ca);
  EXPECT_TRUE(leaf->certificate.MatchesKey(leaf->key));
  EXPECT_EQ(info.not_before, kNow - hours(1));
  EXPECT_EQ(info.not_after, kNow + 90 * kDay);
}

TEST(PkiIssue, LeafUsageAndKeyIdentifiers) {
  const KeyPair ca = MustCa();
  auto leaf = IssueLeaf(Request(), ca, kNow);
  ASSERT_TRUE(leaf.has_value()) << leaf.error().message();
  X509* cert = leaf->certificate.get();
  EXPECT_EQ(X509_get_key_usage(cert), static_cast<std::uint32_t>(KU_DIGITAL_SIGNATURE));
  EXPECT_EQ(X509_get_extended_key_usage(cert), static_cast<std::uint32_t>(XKU_SSL_SERVER));
  EXPECT_EQ(X509_get_extension_flags(cert) & EXFLAG_CA, 0u);
  const ASN1_OCTET_STRING* authority = X509_get0_authority_key_id(cert);
  const ASN1_OCTET_STRING* ca_subject = X509_get0_subject_key_id(ca.certificate.get());
  ASSERT_NE(authority, nullptr);
  ASSERT_NE(ca_subject, nullptr);
  EXPECT_EQ(ASN1_OCTET_STRING_cmp(authority, ca_subject), 0);
  EXPECT_NE(X509_get0_subject_key_id(cert), nullptr);
}

TEST(PkiIssue, RsaLeafAlsoAllowsKeyEncipherment) {
  const KeyPair ca = MustCa();
  LeafRequest request = Request();
  request.key_type = KeyType::kRsa2048;
  auto leaf = IssueLeaf(request, ca, kNow);
  ASSERT_TRUE(leaf.has_value()) << leaf.error().message();
  EXPECT_EQ(X509_get_key_usage(leaf->certificate.get()),
            static_cast<std::uint32_t>(KU_DIGITAL_SIGNATURE | KU_KEY_ENCIPHERMENT));
  EXPECT_EQ(leaf->key.Describe().name, "rsa-2048");
  // Signed by the ECDSA P-256 CA.
  EXPECT_EQ(leaf->certificate.Info().signature_algorithm, "ecdsa-with-SHA256");
}

TEST(PkiIssue, P384CaSignsLeavesWithSha384) {
  CaRequest request;
  request.common_name = "big-ca";
  request.key_type = KeyType::kEcdsaP384;
  auto ca = IssueCa(request, kNow);
  ASSERT_TRUE(ca.has_value()) << ca.error().message();
  auto leaf = IssueLeaf(Request(), *ca, kNow);
  ASSERT_TRUE(leaf.has_value()) << leaf.error().message();
  EXPECT_EQ(leaf->certificate.Info().signature_algorithm, "ecdsa-with-SHA384");
}

TEST(PkiIssue, CommonNameIsTheFirstIpWhenThereIsNoDnsName) {
  const KeyPair ca = MustCa();
  LeafRequest request;
  request.ip_addresses = {"2001:db8::5", "10.0.0.1"};
  auto leaf = IssueLeaf(request, ca, kNow);
  ASSERT_TRUE(leaf.has_value()) << leaf.error().message();
  const CertificateInfo info = leaf->certificate.Info();
  EXPECT_EQ(info.common_name, "2001:db8::5");
  EXPECT_TRUE(info.dns_names.empty());
  EXPECT_THAT(info.ip_addresses, ElementsAre("2001:db8::5", "10.0.0.1"));
}

TEST(PkiIssue, LeafNotAfterIsClampedToTheCa) {
  const KeyPair ca = MustCa(kNow, 30 * kDay);
  LeafRequest request = Request();
  request.validity = 365 * kDay;
  const TimePoint later = kNow + 10 * kDay;
  auto leaf = IssueLeaf(request, ca, later);
  ASSERT_TRUE(leaf.has_value()) << leaf.error().message();
  EXPECT_EQ(leaf->certificate.Info().not_after, ca.certificate.Info().not_after);
  EXPECT_EQ(leaf->certificate.Info().not_before, later - hours(1));
}

TEST(PkiIssue, SerialsArePositiveNonZeroAtMost128BitsAndDistinct) {
  const KeyPair ca = MustCa();
  std::set<std::string> serials = {ca.certificate.Info().serial_hex};
  for (int i = 0; i < 20; ++i) {
    auto leaf = IssueLeaf(Request(), ca, kNow);
    ASSERT_TRUE(leaf.has_value()) << leaf.error().message();
    const std::string serial = leaf->certificate.Info().serial_hex;
    EXPECT_NE(serial, "0");
    EXPECT_EQ(serial.find('-'), std::string::npos) << serial;
    EXPECT_LE(serial.size(), 32u) << serial;
    EXPECT_GE(serial.size(), 16u) << serial;  // a random 127-bit number this short: ~2^-64
    BIGNUM* number = ASN1_INTEGER_to_BN(X509_get0_serialNumber(leaf->certificate.get()), nullptr);
    ASSERT_NE(number, nullptr);
    EXPECT_FALSE(BN_is_negative(number));
    EXPECT_FALSE(BN_is_zero(number));
    EXPECT_LE(BN_num_bits(number), 128);
    BN_free(number);
    serials.insert(serial);
  }
  EXPECT_EQ(serials.size(), 21u);
}

TEST(PkiIssue, LeafFromAnExpiredCaFails) {
  const KeyPair ca = MustCa(kNow, 30 * kDay);
  auto leaf = IssueLeaf(Request(), ca, kNow + 31 * kDay);
  ASSERT_FALSE(leaf.has_value());
  EXPECT_EQ(leaf.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(leaf.error().message(), HasSubstr("webhook-ca"));
  EXPECT_THAT(leaf.error().message(), HasSubstr("expired"));
}

TEST(PkiIssue, LeafWithAMismatchedCaKeyFails) {
  const KeyPair ca = MustCa();
  const KeyPair other = MustCa();
  auto leaf = IssueLeaf(Request(), KeyPair{ca.certificate, other.key}, kNow);
  ASSERT_FALSE(leaf.has_value());
  EXPECT_EQ(leaf.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(leaf.error().message(), HasSubstr("does not belong"));
}

TEST(PkiIssue, LeafWithoutAnyNameFails) {
  auto leaf = IssueLeaf(LeafRequest{}, MustCa(), kNow);
  ASSERT_FALSE(leaf.has_value());
  EXPECT_EQ(leaf.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(leaf.error().message(), HasSubstr("at least one DNS name or IP address"));
}

TEST(PkiIssue, LeafWithAMalformedIpFails) {
  LeafRequest request = Request();
  request.ip_addresses = {"10.0.0.300"};
  auto leaf = IssueLeaf(request, MustCa(), kNow);
  ASSERT_FALSE(leaf.has_value());
  EXPECT_EQ(leaf.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(leaf.error().message(), HasSubstr("\"10.0.0.300\""));
}

TEST(PkiIssue, LeafWithAMalformedDnsNameFails) {
  LeafRequest request = Request();
  request.dns_names = {"svc.ns.svc", "bad_name.example.com"};
  auto leaf = IssueLeaf(request, MustCa(), kNow);
  ASSERT_FALSE(leaf.has_value());
  EXPECT_EQ(leaf.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(leaf.error().message(), HasSubstr("\"bad_name.example.com\""));
}

TEST(PkiIssue, WildcardLeafIsAllowed) {
  LeafRequest request = Request();
  request.dns_names = {"*.ns.svc"};
  auto leaf = IssueLeaf(request, MustCa(), kNow);
  ASSERT_TRUE(leaf.has_value()) << leaf.error().message();
  EXPECT_THAT(leaf->certificate.Info().dns_names, ElementsAre("*.ns.svc"));
}

TEST(PkiIssue, CaWithoutCommonNameFails) {
  auto ca = IssueCa(CaRequest{}, kNow);
  ASSERT_FALSE(ca.has_value());
  EXPECT_EQ(ca.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(ca.error().message(), HasSubstr("common name"));
}

TEST(PkiIssue, NonPositiveValidityFails) {
  CaRequest ca_request;
  ca_request.common_name = "x";
  ca_request.validity = std::chrono::seconds(0);
  auto ca = IssueCa(ca_request, kNow);
  ASSERT_FALSE(ca.has_value());
  EXPECT_EQ(ca.error().code(), ErrorCode::kInvalidArgument);

  LeafRequest request = Request();
  request.validity = std::chrono::seconds(-5);
  auto leaf = IssueLeaf(request, MustCa(), kNow);
  ASSERT_FALSE(leaf.has_value());
  EXPECT_EQ(leaf.error().code(), ErrorCode::kInvalidArgument);
}

TEST(PkiIssue, ValidityBeyondTheMaximumFailsInsteadOfWrapping) {
  // 236 years from 2026 overflows a nanosecond time point: it once gave notAfter 1678.
  CaRequest ca_request;
  ca_request.common_name = "x";
  ca_request.validity = Years(236);
  auto ca = IssueCa(ca_request, kNow);
  ASSERT_FALSE(ca.has_value());
  EXPECT_EQ(ca.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(ca.error().message(), HasSubstr("longer than the maximum of 100y"));

  LeafRequest request = Request();
  request.validity = Years(236);
  auto leaf = IssueLeaf(request, MustCa(), kNow);
  ASSERT_FALSE(leaf.has_value());
  EXPECT_EQ(leaf.error().code(), ErrorCode::kInvalidArgument);
}

TEST(PkiIssue, TheMaximumValidityEndsAHundredYearsLater) {
  const KeyPair ca = MustCa(kNow, kMaxDuration);
  EXPECT_EQ(ca.certificate.Info().not_after, kNow + kMaxDuration);
  LeafRequest request = Request();
  request.validity = kMaxDuration;
  auto leaf = IssueLeaf(request, ca, kNow);
  ASSERT_TRUE(leaf.has_value()) << leaf.error().message();
  EXPECT_EQ(leaf->certificate.Info().not_after, kNow + kMaxDuration);
}

}  // namespace
}  // namespace issue_test
}  // namespace certctl::pki
