#include "certctl/pki/key.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include "support/process.h"

namespace certctl::pki {
namespace key_test {
namespace {

using certctl::testing::Openssl;
using ::testing::HasSubstr;
using ::testing::StartsWith;

PrivateKey MustGenerate(KeyType type) {
  auto key = PrivateKey::Generate(type);
  EXPECT_TRUE(key.has_value()) << key.error().message();
  return *key;
}

std::string MustPem(const PrivateKey& key) {
  auto pem = key.ToPem();
  EXPECT_TRUE(pem.has_value()) << pem.error().message();
  return *pem;
}

TEST(PkiKey, KeyTypeNamesRoundTrip) {
  ASSERT_EQ(AllKeyTypes().size(), 5u);
  for (const KeyType type : AllKeyTypes()) {
    auto parsed = ParseKeyType(KeyTypeName(type));
    ASSERT_TRUE(parsed.has_value()) << KeyTypeName(type);
    EXPECT_EQ(KeyTypeName(*parsed), KeyTypeName(type));
  }
  EXPECT_EQ(KeyTypeName(KeyType::kEcdsaP256), "ecdsa-p256");
  EXPECT_EQ(KeyTypeName(KeyType::kRsa4096), "rsa-4096");
}

TEST(PkiKey, ParseKeyTypeRejectsUnknownNameListingTheKnownOnes) {
  auto parsed = ParseKeyType("ed25519");
  ASSERT_FALSE(parsed.has_value());
  EXPECT_EQ(parsed.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(parsed.error().message(), HasSubstr("\"ed25519\""));
  EXPECT_THAT(parsed.error().message(), HasSubstr("ecdsa-p256"));
}

TEST(PkiKey, GeneratesEcdsaKeysOnTheRightCurve) {
  const KeyDescription p256 = MustGenerate(KeyType::kEcdsaP256).Describe();
  EXPECT_EQ(p256.algorithm, "ecdsa");
  EXPECT_EQ(p256.bits, 256);
  EXPECT_EQ(p256.curve, "P-256");
  EXPECT_EQ(p256.name, "ecdsa-p256");

  const KeyDescription p384 = MustGenerate(KeyType::kEcdsaP384).Describe();
  EXPECT_EQ(p384.bits, 384);
  EXPECT_EQ(p384.curve, "P-384");
  EXPECT_EQ(p384.name, "ecdsa-p384");
}

TEST(PkiKey, GeneratesRsaKeysOfTheRightSize) {
  for (const KeyType type : {KeyType::kRsa2048, KeyType::kRsa3072}) {
    const KeyDescription description = MustGenerate(type).Describe();
    EXPECT_EQ(description.algorithm, "rsa");
    EXPECT_EQ(description.name, KeyTypeName(type));
    EXPECT_TRUE(description.curve.empty());
  }
  EXPECT_EQ(MustGenerate(KeyType::kRsa2048).Describe().bits, 2048);
}

TEST(PkiKey, GeneratedKeysDiffer) {
  const PrivateKey first = MustGenerate(KeyType::kEcdsaP256);
  const PrivateKey second = MustGenerate(KeyType::kEcdsaP256);
  EXPECT_NE(EVP_PKEY_eq(first.get(), second.get()), 1);
}

TEST(PkiKey, ToPemWritesUnencryptedPkcs8ThatReadsBack) {
  for (const KeyType type : {KeyType::kEcdsaP256, KeyType::kRsa2048}) {
    const PrivateKey key = MustGenerate(type);
    const std::string pem = MustPem(key);
    EXPECT_THAT(pem, StartsWith("-----BEGIN PRIVATE KEY-----\n"));
    EXPECT_THAT(pem, HasSubstr("-----END PRIVATE KEY-----"));
    auto parsed = PrivateKey::FromPem(pem);
    ASSERT_TRUE(parsed.has_value()) << parsed.error().message();
    EXPECT_EQ(EVP_PKEY_eq(parsed->get(), key.get()), 1);
    EXPECT_EQ(parsed->Describe().name, KeyTypeName(type));
    EXPECT_EQ(MustPem(*parsed), pem);
  }
}

TEST(PkiKey, CopiesShareTheKey) {
  const PrivateKey key = MustGenerate(KeyType::kEcdsaP256);
  const PrivateKey copy = key;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_EQ(copy.get(), key.get());
}

TEST(PkiKey, FromPemRejectsEmptyInput) {
  for (const char* input : {"", "  \n\t\n"}) {
    auto key = PrivateKey::FromPem(input);
    ASSERT_FALSE(key.has_value());
    EXPECT_EQ(key.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(key.error().message(), HasSubstr("empty"));
  }
}

TEST(PkiKey, FromPemRejectsGarbage) {
  auto key = PrivateKey::FromPem("this is not a key\n");
  ASSERT_FALSE(key.has_value());
  EXPECT_EQ(key.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(key.error().message(), HasSubstr("no PEM block found"));
}

TEST(PkiKey, FromPemRejectsTruncatedPem) {
  const std::string pem = MustPem(MustGenerate(KeyType::kEcdsaP256));
  auto key = PrivateKey::FromPem(pem.substr(0, pem.size() / 2));
  ASSERT_FALSE(key.has_value());
  EXPECT_EQ(key.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(key.error().message(), HasSubstr("truncated"));
}

TEST(PkiKey, FromPemRejectsDamagedBase64) {
  std::string pem = MustPem(MustGenerate(KeyType::kEcdsaP256));
  const std::size_t body = pem.find('\n') + 1;
  pem.replace(body, 20, "!!!!!!!!!!!!!!!!!!!!");
  auto key = PrivateKey::FromPem(pem);
  ASSERT_FALSE(key.has_value());
  EXPECT_EQ(key.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(key.error().message(), HasSubstr("cannot parse PRIVATE KEY"));
}

TEST(PkiKey, FromPemRejectsDerWithAHint) {
  const std::string der =
      Openssl({"pkey", "-outform", "DER"}, MustPem(MustGenerate(KeyType::kEcdsaP256)));
  ASSERT_FALSE(der.empty());
  auto key = PrivateKey::FromPem(der);
  ASSERT_FALSE(key.has_value());
  EXPECT_EQ(key.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(key.error().message(), HasSubstr("looks like DER, expected a PEM private key"));
}

TEST(PkiKey, FromPemRejectsEncryptedPkcs8WithoutPrompting) {
  const std::string encrypted = Openssl({"pkey", "-aes256", "-passout", "pass:secret"},
                                        MustPem(MustGenerate(KeyType::kEcdsaP256)));
  ASSERT_THAT(encrypted, HasSubstr("ENCRYPTED PRIVATE KEY"));
  auto key = PrivateKey::FromPem(encrypted);
  ASSERT_FALSE(key.has_value());
  EXPECT_EQ(key.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(key.error().message(), HasSubstr("encrypted"));
}

TEST(PkiKey, FromPemRejectsEncryptedTraditionalKey) {
  const std::string encrypted =
      Openssl({"rsa", "-aes128", "-traditional", "-passout", "pass:secret"},
              MustPem(MustGenerate(KeyType::kRsa2048)));
  ASSERT_THAT(encrypted, HasSubstr("Proc-Type: 4,ENCRYPTED"));
  auto key = PrivateKey::FromPem(encrypted);
  ASSERT_FALSE(key.has_value());
  EXPECT_THAT(key.error().message(), HasSubstr("encrypted"));
}

TEST(PkiKey, FromPemRejectsACertificateNamingWhatItFound) {
  const std::string certificate =
      Openssl({"req", "-x509", "-key", "/dev/stdin", "-subj", "/CN=not-a-key", "-days", "1"},
              MustPem(MustGenerate(KeyType::kEcdsaP256)));
  auto key = PrivateKey::FromPem(certificate);
  ASSERT_FALSE(key.has_value());
  EXPECT_THAT(key.error().message(), HasSubstr("no private key found"));
  EXPECT_THAT(key.error().message(), HasSubstr("CERTIFICATE"));
}

TEST(PkiKey, FromPemRejectsTwoKeys) {
  const std::string two =
      MustPem(MustGenerate(KeyType::kEcdsaP256)) + MustPem(MustGenerate(KeyType::kEcdsaP256));
  auto key = PrivateKey::FromPem(two);
  ASSERT_FALSE(key.has_value());
  EXPECT_THAT(key.error().message(), HasSubstr("found 2 private keys"));
}

TEST(PkiKey, ErrorMessagesNeverContainKeyMaterial) {
  std::string pem = MustPem(MustGenerate(KeyType::kEcdsaP256));
  const std::size_t body = pem.find('\n') + 1;
  const std::string secret_line = pem.substr(body + 8, 40);
  pem.replace(body, 4, "%%%%");
  auto key = PrivateKey::FromPem(pem);
  ASSERT_FALSE(key.has_value());
  EXPECT_THAT(key.error().message(), ::testing::Not(HasSubstr(secret_line)));
}

}  // namespace
}  // namespace key_test
}  // namespace certctl::pki
