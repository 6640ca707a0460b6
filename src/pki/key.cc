#include "certctl/pki/key.h"

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <openssl/core_names.h>
#include <openssl/decoder.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "certctl/util/text.h"

#include "pki/openssl_util.h"

namespace certctl::pki {
namespace {

using internal::EvpPkeyCtxPtr;
using internal::EvpPkeyPtr;
using internal::OpensslError;

constexpr std::array<std::pair<KeyType, std::string_view>, 5> kKeyTypes = {{
    {KeyType::kEcdsaP256, "ecdsa-p256"},
    {KeyType::kEcdsaP384, "ecdsa-p384"},
    {KeyType::kRsa2048, "rsa-2048"},
    {KeyType::kRsa3072, "rsa-3072"},
    {KeyType::kRsa4096, "rsa-4096"},
}};

constexpr std::array<KeyType, 5> kAllKeyTypes = {KeyType::kEcdsaP256, KeyType::kEcdsaP384,
                                                 KeyType::kRsa2048, KeyType::kRsa3072,
                                                 KeyType::kRsa4096};

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// Installed as the PEM password callback so that an encrypted key fails to decode
// instead of OpenSSL prompting for a passphrase on the terminal.
int RefusePassphrase(char* /*buffer*/, int /*size*/, int /*rwflag*/, void* /*user*/) { return -1; }

// Naming the structure and key type lets OpenSSL 3 build a decoder for just that type;
// leaving them open makes it try every decoder it has, which costs about five times as
// much and dominates a `certctl check` run.
struct DecoderHint {
  const char* structure;
  const char* key_type;
};

std::optional<DecoderHint> HintForKey(const internal::PemBlock& block) {
  if (block.label == "RSA PRIVATE KEY") {
    return DecoderHint{"type-specific", "RSA"};
  }
  if (block.label == "EC PRIVATE KEY") {
    return DecoderHint{"type-specific", "EC"};
  }
  if (block.label != "PRIVATE KEY") {
    return std::nullopt;
  }
  auto bio = internal::ReadBio(block.text);
  if (!bio) {
    return std::nullopt;
  }
  // PKCS8_PRIV_KEY_INFO_free cleanses the key bytes it holds.
  std::unique_ptr<PKCS8_PRIV_KEY_INFO, decltype(&PKCS8_PRIV_KEY_INFO_free)> info(
      PEM_read_bio_PKCS8_PRIV_KEY_INFO(bio->get(), nullptr, RefusePassphrase, nullptr),
      &PKCS8_PRIV_KEY_INFO_free);
  const X509_ALGOR* algorithm = nullptr;
  if (!info || PKCS8_pkey_get0(nullptr, nullptr, nullptr, &algorithm, info.get()) != 1) {
    ERR_clear_error();
    return std::nullopt;
  }
  const ASN1_OBJECT* object = nullptr;
  X509_ALGOR_get0(&object, nullptr, nullptr, algorithm);
  switch (OBJ_obj2nid(object)) {
    case NID_X9_62_id_ecPublicKey:
      return DecoderHint{"PrivateKeyInfo", "EC"};
    case NID_rsaEncryption:
      return DecoderHint{"PrivateKeyInfo", "RSA"};
    case NID_ED25519:
      return DecoderHint{"PrivateKeyInfo", "ED25519"};
    default:
      return std::nullopt;
  }
}

// Empty when the hinted decoder cannot read the block; the caller then falls back to the
// general reader, which also yields the better error message.
EvpPkeyPtr DecodeWithHint(const internal::PemBlock& block, const DecoderHint& hint) {
  EVP_PKEY* decoded = nullptr;
  std::unique_ptr<OSSL_DECODER_CTX, decltype(&OSSL_DECODER_CTX_free)> decoder(
      OSSL_DECODER_CTX_new_for_pkey(&decoded, "PEM", hint.structure, hint.key_type,
                                    EVP_PKEY_KEYPAIR, nullptr, nullptr),
      &OSSL_DECODER_CTX_free);
  if (!decoder) {
    ERR_clear_error();
    return nullptr;
  }
  const auto* data = reinterpret_cast<const unsigned char*>(block.text.data());
  std::size_t length = block.text.size();
  // On success the decoder hands the new key to `decoded`; we own it from here.
  if (OSSL_DECODER_from_data(decoder.get(), &data, &length) != 1 || decoded == nullptr) {
    EVP_PKEY_free(decoded);
    ERR_clear_error();
    return nullptr;
  }
  return EvpPkeyPtr(decoded);
}

Result<EvpPkeyPtr> GenerateEc(const char* group) {
  EvpPkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr));
  if (!ctx) {
    return Fail(OpensslError("cannot create EC key context"));
  }
  if (EVP_PKEY_keygen_init(ctx.get()) <= 0 || EVP_PKEY_CTX_set_group_name(ctx.get(), group) <= 0) {
    return Fail(OpensslError(std::string("cannot set up EC key generation for ") + group));
  }
  EVP_PKEY* raw = nullptr;
  const int generated = EVP_PKEY_generate(ctx.get(), &raw);
  EvpPkeyPtr key(raw);  // owns whatever came back, on failure too
  if (generated <= 0 || !key) {
    return Fail(OpensslError(std::string("cannot generate EC key on ") + group));
  }
  return key;
}

Result<EvpPkeyPtr> GenerateRsa(int bits) {
  EvpPkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_name(nullptr, "RSA", nullptr));
  if (!ctx) {
    return Fail(OpensslError("cannot create RSA key context"));
  }
  if (EVP_PKEY_keygen_init(ctx.get()) <= 0 ||
      EVP_PKEY_CTX_set_rsa_keygen_bits(ctx.get(), bits) <= 0) {
    return Fail(OpensslError("cannot set up RSA-" + std::to_string(bits) + " key generation"));
  }
  EVP_PKEY* raw = nullptr;
  const int generated = EVP_PKEY_generate(ctx.get(), &raw);
  EvpPkeyPtr key(raw);  // owns whatever came back, on failure too
  if (generated <= 0 || !key) {
    return Fail(OpensslError("cannot generate RSA-" + std::to_string(bits) + " key"));
  }
  return key;
}

Result<EvpPkeyPtr> GenerateKey(KeyType type) {
  switch (type) {
    case KeyType::kEcdsaP256:
      return GenerateEc("P-256");
    case KeyType::kEcdsaP384:
      return GenerateEc("P-384");
    case KeyType::kRsa2048:
      return GenerateRsa(2048);
    case KeyType::kRsa3072:
      return GenerateRsa(3072);
    case KeyType::kRsa4096:
      return GenerateRsa(4096);
  }
  return Fail(ErrorCode::kInvalidArgument, "unknown key type");
}

}  // namespace

std::string_view KeyTypeName(KeyType type) {
  for (const auto& [candidate, name] : kKeyTypes) {
    if (candidate == type) {
      return name;
    }
  }
  return "unknown";
}

Result<KeyType> ParseKeyType(std::string_view name) {
  const std::string lower = AsciiLower(name);
  std::string known;
  for (const auto& [type, candidate] : kKeyTypes) {
    if (candidate == lower) {
      return type;
    }
    known += known.empty() ? "" : ", ";
    known += candidate;
  }
  return Fail(ErrorCode::kInvalidArgument,
              "unknown key type \"" + std::string(name) + "\" (one of " + known + ")");
}

std::span<const KeyType> AllKeyTypes() { return kAllKeyTypes; }

PrivateKey::PrivateKey(EVP_PKEY* owned) : key_(owned, EVP_PKEY_free) {}

Result<PrivateKey> PrivateKey::Generate(KeyType type) {
  ERR_clear_error();
  auto key = GenerateKey(type);
  if (!key) {
    return Fail(key.error());
  }
  // PrivateKey takes ownership of the EVP_PKEY.
  return PrivateKey(key->release());
}

Result<PrivateKey> PrivateKey::FromPem(std::string_view pem) {
  ERR_clear_error();
  auto blocks = internal::ScanPem(pem, "private key");
  if (!blocks) {
    return Fail(blocks.error());
  }
  const internal::PemBlock* found = nullptr;
  std::string other_labels;
  int key_blocks = 0;
  for (const internal::PemBlock& block : *blocks) {
    if (EndsWith(block.label, "PRIVATE KEY")) {
      ++key_blocks;
      if (found == nullptr) {
        found = &block;
      }
    } else {
      other_labels += other_labels.empty() ? "" : ", ";
      other_labels += block.label;
    }
  }
  if (found == nullptr) {
    return Fail(ErrorCode::kInvalidArgument,
                "no private key found, expected a PEM private key (found " + other_labels + ")");
  }
  if (key_blocks > 1) {
    return Fail(ErrorCode::kInvalidArgument,
                "found " + std::to_string(key_blocks) + " private keys, expected exactly one");
  }
  if (found->label == "ENCRYPTED PRIVATE KEY" ||
      found->text.find("Proc-Type: 4,ENCRYPTED") != std::string_view::npos) {
    return Fail(ErrorCode::kInvalidArgument,
                "the private key is encrypted; certctl needs an unencrypted key "
                "(decrypt it with: openssl pkey -in KEY -out KEY.plain)");
  }
  if (auto hint = HintForKey(*found)) {
    if (EvpPkeyPtr key = DecodeWithHint(*found, *hint)) {
      // PrivateKey takes ownership of the EVP_PKEY.
      return PrivateKey(key.release());
    }
  }
  auto bio = internal::ReadBio(found->text);
  if (!bio) {
    return Fail(bio.error());
  }
  EvpPkeyPtr key(PEM_read_bio_PrivateKey(bio->get(), nullptr, RefusePassphrase, nullptr));
  if (!key) {
    return Fail(OpensslError("cannot parse " + found->label, ErrorCode::kInvalidArgument));
  }
  // PrivateKey takes ownership of the EVP_PKEY.
  return PrivateKey(key.release());
}

Result<std::string> PrivateKey::ToPem() const {
  ERR_clear_error();
  // Secure-heap memory, cleared when freed: the PEM text is key material.
  internal::BioPtr bio(BIO_new(BIO_s_secmem()));
  if (!bio) {
    return Fail(OpensslError("cannot create memory BIO"));
  }
  // No cipher: unencrypted PKCS#8 ("BEGIN PRIVATE KEY").
  if (PEM_write_bio_PrivateKey(bio.get(), key_.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return Fail(OpensslError("cannot encode private key as PKCS#8 PEM"));
  }
  return internal::BioContents(bio.get());
}

KeyDescription PrivateKey::Describe() const { return internal::DescribeKey(key_.get()); }

namespace internal {

KeyDescription DescribeKey(const EVP_PKEY* key) {
  KeyDescription out;
  if (key == nullptr) {
    out.algorithm = "unknown";
    out.name = "unknown";
    return out;
  }
  out.bits = EVP_PKEY_get_bits(key);
  const std::string bits = std::to_string(out.bits);
  if (EVP_PKEY_is_a(key, "RSA")) {
    out.algorithm = "rsa";
    out.name = "rsa-" + bits;
  } else if (EVP_PKEY_is_a(key, "RSA-PSS")) {
    out.algorithm = "rsa-pss";
    out.name = "rsa-pss-" + bits;
  } else if (EVP_PKEY_is_a(key, "EC")) {
    out.algorithm = "ecdsa";
    char group[80] = {};
    std::size_t length = 0;
    if (EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group),
                                       &length) == 1) {
      const char* nist = EC_curve_nid2nist(OBJ_txt2nid(group));
      out.curve = nist != nullptr ? nist : group;
    } else {
      ERR_clear_error();
      out.curve = "explicit";
    }
    std::string short_curve;
    for (const char c : AsciiLower(out.curve)) {
      if (c != '-') {
        short_curve += c;
      }
    }
    out.name = "ecdsa-" + short_curve;
  } else if (EVP_PKEY_is_a(key, "ED25519")) {
    out.algorithm = "ed25519";
    out.name = "ed25519";
  } else if (EVP_PKEY_is_a(key, "ED448")) {
    out.algorithm = "ed448";
    out.name = "ed448";
  } else if (EVP_PKEY_is_a(key, "DSA")) {
    out.algorithm = "dsa";
    out.name = "dsa-" + bits;
  } else {
    const char* type = EVP_PKEY_get0_type_name(key);
    out.algorithm = type != nullptr ? AsciiLower(type) : "unknown";
    out.name = out.bits > 0 ? out.algorithm + "-" + bits : out.algorithm;
  }
  return out;
}

}  // namespace internal
}  // namespace certctl::pki
