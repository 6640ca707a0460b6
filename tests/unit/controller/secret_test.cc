#include "certctl/controller/secret.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/pki/issue.h"
#include "certctl/pki/validate.h"
#include "certctl/util/base64.h"

#include "fakes/fake_clock.h"

namespace certctl::controller {
namespace {

using Json = nlohmann::json;
using certctl::testing::FakeClock;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const TimePoint kNow = FakeClock().Now();

struct Pem {
  std::string ca_crt;
  std::string ca_key;
  std::string tls_crt;
  std::string tls_key;
};

Pem MustPair() {
  pki::CaRequest ca_request;
  ca_request.common_name = "svc-ca";
  auto ca = pki::IssueCa(ca_request, kNow);
  EXPECT_TRUE(ca.has_value()) << ca.error().message();
  pki::LeafRequest leaf_request;
  leaf_request.dns_names = {"svc.ns.svc"};
  auto leaf = pki::IssueLeaf(leaf_request, *ca, kNow);
  EXPECT_TRUE(leaf.has_value()) << leaf.error().message();
  return {ca->certificate.ToPem(), ca->key.ToPem().value_or(""), leaf->certificate.ToPem(),
          leaf->key.ToPem().value_or("")};
}

const Pem& SharedPair() {
  static const Pem pair = MustPair();
  return pair;
}

Json SecretObject(Json data, std::string type = kTlsSecretType, Json labels = Json::object()) {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata",
           {{"name", "webhook-server-cert"},
            {"namespace", "ns"},
            {"resourceVersion", "12"},
            {"labels", std::move(labels)}}},
          {"type", std::move(type)},
          {"data", std::move(data)}};
}

Json EncodedData(const Pem& pem) {
  return {{"ca.crt", Base64Encode(pem.ca_crt)},
          {"ca.key", Base64Encode(pem.ca_key)},
          {"tls.crt", Base64Encode(pem.tls_crt)},
          {"tls.key", Base64Encode(pem.tls_key)}};
}

std::vector<Finding> Findings(const pki::PairSource& source) {
  pki::ValidationPolicy policy;
  policy.dns_names = {"svc.ns.svc"};
  return pki::Validate(source, policy, kNow).AllFindings();
}

auto IsFinding(FindingCode code, const std::string& object) {
  return AllOf(Field(&Finding::code, code), Field(&Finding::object, object));
}

TEST(ReadSecretPair, NamesTheSecretLikeKubectl) {
  EXPECT_EQ(SecretObjectName("ns", "webhook-server-cert"), "secret/ns/webhook-server-cert");
}

TEST(ReadSecretPair, DecodesTheFourKeysIntoAValidPair) {
  const Pem& pem = SharedPair();
  const SecretPair pair = ReadSecretPair(SecretObject(EncodedData(pem)));
  EXPECT_EQ(pair.type, "kubernetes.io/tls");
  EXPECT_THAT(pair.findings, IsEmpty());
  EXPECT_EQ(pair.source.ca_pem, pem.ca_crt);
  EXPECT_EQ(pair.source.ca_key_pem, pem.ca_key);
  EXPECT_EQ(pair.source.cert_pem, pem.tls_crt);
  EXPECT_EQ(pair.source.key_pem, pem.tls_key);
  EXPECT_THAT(Findings(pair.source), IsEmpty());
}

TEST(ReadSecretPair, LabelsEveryPartWithSecretAndKey) {
  const SecretPair pair = ReadSecretPair(SecretObject(Json::object()));
  EXPECT_EQ(pair.source.ca_label, "secret/ns/webhook-server-cert[ca.crt]");
  EXPECT_EQ(pair.source.ca_key_label, "secret/ns/webhook-server-cert[ca.key]");
  EXPECT_EQ(pair.source.cert_label, "secret/ns/webhook-server-cert[tls.crt]");
  EXPECT_EQ(pair.source.key_label, "secret/ns/webhook-server-cert[tls.key]");
}

TEST(ReadSecretPair, DetectsTheManagedByLabel) {
  const Json data = EncodedData(SharedPair());
  EXPECT_TRUE(ReadSecretPair(
                  SecretObject(data, kTlsSecretType,
                               {{"app.kubernetes.io/managed-by", "certctl"}, {"app", "webhook"}}))
                  .managed);
  EXPECT_FALSE(ReadSecretPair(SecretObject(data, kTlsSecretType,
                                           {{"app.kubernetes.io/managed-by", "cert-manager"}}))
                   .managed);
  EXPECT_FALSE(ReadSecretPair(SecretObject(data, kTlsSecretType, {{"app", "certctl"}})).managed);
  Json unlabelled = SecretObject(data);
  unlabelled["metadata"].erase("labels");
  EXPECT_FALSE(ReadSecretPair(unlabelled).managed);
}

TEST(ReadSecretPair, OpaqueSecretIsAWrongTypeFinding) {
  const SecretPair pair = ReadSecretPair(SecretObject(EncodedData(SharedPair()), "Opaque"));
  EXPECT_EQ(pair.type, "Opaque");
  ASSERT_EQ(pair.findings.size(), 1u);
  EXPECT_EQ(pair.findings[0].code, FindingCode::kWrongType);
  EXPECT_EQ(pair.findings[0].object, "secret/ns/webhook-server-cert");
  EXPECT_THAT(pair.findings[0].message,
              AllOf(HasSubstr("\"Opaque\""), HasSubstr("kubernetes.io/tls")));
  // The content is still read and validated.
  EXPECT_THAT(Findings(pair.source), IsEmpty());
}

TEST(ReadSecretPair, SecretWithoutTypeIsOpaque) {
  Json secret = SecretObject(EncodedData(SharedPair()));
  secret.erase("type");
  const SecretPair pair = ReadSecretPair(secret);
  EXPECT_EQ(pair.type, "Opaque");
  EXPECT_THAT(pair.findings,
              Contains(IsFinding(FindingCode::kWrongType, "secret/ns/webhook-server-cert")));
}

TEST(ReadSecretPair, MissingKeysStayAbsentAndValidationNamesThem) {
  const Pem& pem = SharedPair();
  const SecretPair pair = ReadSecretPair(SecretObject({{"tls.crt", Base64Encode(pem.tls_crt)}}));
  EXPECT_EQ(pair.source.cert_pem, pem.tls_crt);
  EXPECT_FALSE(pair.source.ca_pem.has_value());
  EXPECT_FALSE(pair.source.key_pem.has_value());
  EXPECT_FALSE(pair.source.ca_key_pem.has_value());

  const std::vector<Finding> findings = Findings(pair.source);
  EXPECT_THAT(findings,
              Contains(IsFinding(FindingCode::kMissing, "secret/ns/webhook-server-cert[ca.crt]")));
  EXPECT_THAT(findings,
              Contains(IsFinding(FindingCode::kMissing, "secret/ns/webhook-server-cert[tls.key]")));
}

TEST(ReadSecretPair, SecretWithoutDataHasNoParts) {
  Json secret = SecretObject(Json::object());
  secret.erase("data");
  const SecretPair pair = ReadSecretPair(secret);
  EXPECT_FALSE(pair.source.ca_pem.has_value());
  EXPECT_FALSE(pair.source.cert_pem.has_value());
  EXPECT_FALSE(pair.source.key_pem.has_value());
  EXPECT_FALSE(pair.source.ca_key_pem.has_value());
}

TEST(ReadSecretPair, NonStringValueStaysAbsent) {
  const SecretPair pair = ReadSecretPair(SecretObject({{"tls.crt", 42}, {"tls.key", nullptr}}));
  EXPECT_FALSE(pair.source.cert_pem.has_value());
  EXPECT_FALSE(pair.source.key_pem.has_value());
}

TEST(ReadSecretPair, NonBase64DataGoesToValidationAsUnparsable) {
  const Pem& pem = SharedPair();
  Json data = EncodedData(pem);
  data["tls.crt"] = "this is not base64!";
  const SecretPair pair = ReadSecretPair(SecretObject(data));
  EXPECT_EQ(pair.source.cert_pem, "this is not base64!");
  EXPECT_THAT(Findings(pair.source), Contains(IsFinding(FindingCode::kUnparsable,
                                                        "secret/ns/webhook-server-cert[tls.crt]")));
}

TEST(ReadSecretPair, EmptyValueIsPresentButEmpty) {
  const SecretPair pair = ReadSecretPair(SecretObject({{"ca.key", ""}}));
  EXPECT_EQ(pair.source.ca_key_pem, "");
}

// Whatever an API server or emulator sends, reading never throws.
TEST(ReadSecretPair, MalformedFieldsDoNotThrow) {
  const Json cases[] = {
      Json::array(),
      Json("secret"),
      Json{{"metadata", nullptr}, {"type", nullptr}, {"data", nullptr}},
      Json{{"metadata", {{"name", 7}, {"namespace", nullptr}, {"labels", {{kManagedByLabel, 1}}}}},
           {"type", 3}},
      Json{{"metadata", {{"labels", "app=certctl"}}}, {"data", Json::array()}},
  };
  for (const Json& secret : cases) {
    SecretPair pair;
    EXPECT_NO_THROW(pair = ReadSecretPair(secret)) << secret.dump();
    EXPECT_FALSE(pair.managed) << secret.dump();
    EXPECT_FALSE(pair.source.cert_pem.has_value()) << secret.dump();
  }
}

}  // namespace
}  // namespace certctl::controller
