#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <openssl/types.h>

#include "certctl/util/result.h"

namespace certctl::pki {

// Key types certctl generates (--key-type).
enum class KeyType { kEcdsaP256, kEcdsaP384, kRsa2048, kRsa3072, kRsa4096 };

std::string_view KeyTypeName(KeyType type);  // "ecdsa-p256", "rsa-2048", ...
Result<KeyType> ParseKeyType(std::string_view name);
std::span<const KeyType> AllKeyTypes();

// What a key is, for any key certctl reads, including ones it would never generate.
struct KeyDescription {
  std::string algorithm;  // "ecdsa", "rsa", "ed25519", "ed448", "dsa", or OpenSSL's name
  int bits = 0;           // modulus or curve size
  std::string curve;      // "P-256", "P-384", "P-521", OpenSSL's name otherwise; empty for non-EC
  std::string name;       // "ecdsa-p256", "rsa-2048", "ed25519", "dsa-1024", ...
};

// An immutable private key. Copies share the underlying EVP_PKEY.
class PrivateKey {
 public:
  static Result<PrivateKey> Generate(KeyType type);

  // Accepts PKCS#8 ("PRIVATE KEY"), PKCS#1 ("RSA PRIVATE KEY") and SEC1 ("EC PRIVATE KEY").
  // Encrypted keys, DER, empty or truncated input give kInvalidArgument with the reason.
  static Result<PrivateKey> FromPem(std::string_view pem);

  // Unencrypted PKCS#8 PEM.
  Result<std::string> ToPem() const;

  KeyDescription Describe() const;

  // For the pki implementation; never null.
  EVP_PKEY* get() const { return key_.get(); }

  explicit PrivateKey(EVP_PKEY* owned);  // takes ownership

 private:
  std::shared_ptr<EVP_PKEY> key_;
};

}  // namespace certctl::pki
