#include "certctl/controller/secret.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/pki/issue.h"
#include "certctl/pki/validate.h"
#include "certctl/util/base64.h"

#include "fakes/fake_clock.h"
#include "support/test_pki.h"

namespace certctl::controller {
namespace secret_test {
namespace {

using Json = nlohmann::json;
using certctl::testing::CaBuilder;
using certctl::testing::FakeClock;
using certctl::testing::KeyPem;
using certctl::testing::LeafBuilder;
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
  const pki::KeyPair ca = CaBuilder("svc-ca").At(kNow).Build();
  const pki::KeyPair leaf = LeafBuilder(ca).At(kNow).Build();
  return {ca.certificate.ToPem(), KeyPem(ca.key), leaf.certificate.ToPem(), KeyPem(leaf.key)};
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

SecretPair MustRead(const Json& secret) {
  auto pair = ReadSecretPair(secret);
  EXPECT_TRUE(pair) << pair.error().message();
  return pair ? std::move(*pair) : SecretPair{};
}

TEST(ReadSecretPair, NamesTheSecretLikeKubectl) {
  EXPECT_EQ(SecretObjectName("ns", "webhook-server-cert"), "secret/ns/webhook-server-cert");
}

TEST(ReadSecretPair, DecodesTheFourKeysIntoAValidPair) {
  const Pem& pem = SharedPair();
  const SecretPair pair = MustRead(SecretObject(EncodedData(pem)));
  EXPECT_EQ(pair.type, "kubernetes.io/tls");
  EXPECT_THAT(pair.findings, IsEmpty());
  EXPECT_EQ(pair.source.ca_pem, pem.ca_crt);
  EXPECT_EQ(pair.source.ca_key_pem, pem.ca_key);
  EXPECT_EQ(pair.source.cert_pem, pem.tls_crt);
  EXPECT_EQ(pair.source.key_pem, pem.tls_key);
  EXPECT_THAT(Findings(pair.source), IsEmpty());
}

TEST(ReadSecretPair, LabelsEveryPartWithSecretAndKey) {
  const SecretPair pair = MustRead(SecretObject(Json::object()));
  EXPECT_EQ(pair.source.ca_label, "secret/ns/webhook-server-cert[ca.crt]");
  EXPECT_EQ(pair.source.ca_key_label, "secret/ns/webhook-server-cert[ca.key]");
  EXPECT_EQ(pair.source.cert_label, "secret/ns/webhook-server-cert[tls.crt]");
  EXPECT_EQ(pair.source.key_label, "secret/ns/webhook-server-cert[tls.key]");
}

TEST(ReadSecretPair, DetectsTheManagedByLabel) {
  const Json data = EncodedData(SharedPair());
  EXPECT_TRUE(
      MustRead(SecretObject(data, kTlsSecretType,
                            {{"app.kubernetes.io/managed-by", "certctl"}, {"app", "webhook"}}))
          .managed);
  EXPECT_FALSE(MustRead(SecretObject(data, kTlsSecretType,
                                     {{"app.kubernetes.io/managed-by", "cert-manager"}}))
                   .managed);
  EXPECT_FALSE(MustRead(SecretObject(data, kTlsSecretType, {{"app", "certctl"}})).managed);
  Json unlabelled = SecretObject(data);
  unlabelled["metadata"].erase("labels");
  EXPECT_FALSE(MustRead(unlabelled).managed);
}

TEST(ReadSecretPair, OpaqueSecretIsAWrongTypeFinding) {
  const SecretPair pair = MustRead(SecretObject(EncodedData(SharedPair()), "Opaque"));
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
  const SecretPair pair = MustRead(secret);
  EXPECT_EQ(pair.type, "Opaque");
  EXPECT_THAT(pair.findings,
              Contains(IsFinding(FindingCode::kWrongType, "secret/ns/webhook-server-cert")));
}

TEST(ReadSecretPair, MissingKeysStayAbsentAndValidationNamesThem) {
  const Pem& pem = SharedPair();
  const SecretPair pair = MustRead(SecretObject({{"tls.crt", Base64Encode(pem.tls_crt)}}));
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
  const SecretPair pair = MustRead(secret);
  EXPECT_FALSE(pair.source.ca_pem.has_value());
  EXPECT_FALSE(pair.source.cert_pem.has_value());
  EXPECT_FALSE(pair.source.key_pem.has_value());
  EXPECT_FALSE(pair.source.ca_key_pem.has_value());
}

TEST(ReadSecretPair, NullValueStaysAbsent) {
  const SecretPair pair = MustRead(SecretObject({{"tls.key", nullptr}}));
  EXPECT_FALSE(pair.source.key_pem.has_value());
}

// The API server stores only valid base64: data that is not is an answer to refuse, never a
// broken certificate to replace (which would replace a CA certctl cannot even see).
TEST(ReadSecretPair, NonBase64DataIsRefusedNamingTheKey) {
  const Pem& pem = SharedPair();
  Json data = EncodedData(pem);
  data["ca.crt"] = "%%%% not base64!";
  auto pair = ReadSecretPair(SecretObject(data));
  ASSERT_FALSE(pair);
  EXPECT_EQ(pair.error().code(), ErrorCode::kBadResponse);
  EXPECT_THAT(pair.error().message(),
              ::testing::HasSubstr("secret/ns/webhook-server-cert: data[ca.crt] is not base64"));
}

TEST(ReadSecretPair, EmptyValueIsPresentButEmpty) {
  const SecretPair pair = MustRead(SecretObject({{"ca.key", ""}}));
  EXPECT_EQ(pair.source.ca_key_pem, "");
}

// Whatever an API server sends, reading never throws, and a field of the wrong type is an
// error naming it: read as "no data", it once made the job replace a good CA.
TEST(ReadSecretPair, FieldsOfTheWrongTypeAreErrorsNamingTheField) {
  const Pem& pem = SharedPair();
  const auto with = [&](const std::string& pointer, const Json& value) {
    Json secret = SecretObject(EncodedData(pem));
    secret[Json::json_pointer(pointer)] = value;
    return secret;
  };
  const std::pair<Json, std::string> cases[] = {
      {Json::array(), "not an object"},
      {Json("secret"), "not an object"},
      {with("/data", Json::array({"ca.crt", "tls.crt"})), "data is an array, not an object"},
      {with("/data", "text"), "data is a string, not an object"},
      {with("/data/tls.crt", 42), "data.tls.crt is a number, not a string"},
      {with("/data/ca.crt", Json::object()), "data.ca.crt is an object, not a string"},
      {with("/metadata/resourceVersion", Json{{"rv", "1001"}}),
       "metadata.resourceVersion is an object, not a string"},
      {with("/metadata/name", 7), "metadata.name is a number, not a string"},
      {with("/metadata/labels", Json::array()), "metadata.labels is an array, not an object"},
      {with("/metadata/labels", Json{{kManagedByLabel, 1}}),
       "metadata.labels[app.kubernetes.io/managed-by] is not a string"},
      {with("/type", 5), "type is a number, not a string"},
  };
  for (const auto& [secret, message] : cases) {
    Result<SecretPair> pair = SecretPair{};
    EXPECT_NO_THROW(pair = ReadSecretPair(secret)) << secret.dump();
    ASSERT_FALSE(pair) << secret.dump();
    EXPECT_EQ(pair.error().code(), ErrorCode::kBadResponse);
    EXPECT_THAT(pair.error().message(), HasSubstr(message)) << secret.dump();
  }
  // Null fields are absent, as the API server treats them.
  Json nulls = SecretObject(EncodedData(pem));
  nulls["metadata"]["labels"] = nullptr;
  nulls["type"] = nullptr;
  const SecretPair pair = MustRead(nulls);
  EXPECT_FALSE(pair.managed);
  EXPECT_EQ(pair.type, "Opaque");
}

}  // namespace
}  // namespace secret_test
}  // namespace certctl::controller
