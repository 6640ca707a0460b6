#include "certctl/controller/secret.h"

#include "certctl/util/base64.h"

namespace certctl::controller {
namespace {

// object[key] when object is an object and the value a string, else `fallback`: fields of
// the wrong JSON type must not throw out of the module.
std::string StringField(const nlohmann::json& object, const char* key, std::string fallback) {
  if (!object.is_object()) {
    return fallback;
  }
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : fallback;
}

}  // namespace

std::string SecretObjectName(std::string_view ns, std::string_view name) {
  return "secret/" + std::string(ns) + "/" + std::string(name);
}

SecretPair ReadSecretPair(const nlohmann::json& secret) {
  const nlohmann::json empty = nlohmann::json::object();
  const nlohmann::json& metadata = secret.contains("metadata") ? secret["metadata"] : empty;
  const std::string object =
      SecretObjectName(StringField(metadata, "namespace", ""), StringField(metadata, "name", ""));
  SecretPair pair;
  pair.type = StringField(secret, "type", "Opaque");
  if (metadata.contains("labels")) {
    pair.managed = StringField(metadata["labels"], kManagedByLabel, "") == kManagedByValue;
  }
  if (pair.type != kTlsSecretType) {
    pair.findings.push_back({FindingCode::kWrongType, object,
                             "type is \"" + pair.type + "\", expected \"" + kTlsSecretType + "\""});
  }
  struct Key {
    const char* name;
    std::optional<std::string>* content;
    std::string* label;
  };
  const Key keys[] = {
      {"ca.crt", &pair.source.ca_pem, &pair.source.ca_label},
      {"tls.crt", &pair.source.cert_pem, &pair.source.cert_label},
      {"tls.key", &pair.source.key_pem, &pair.source.key_label},
      {"ca.key", &pair.source.ca_key_pem, &pair.source.ca_key_label},
  };
  const nlohmann::json& data =
      secret.contains("data") && secret["data"].is_object() ? secret["data"] : empty;
  for (const Key& key : keys) {
    *key.label = object + "[" + key.name + "]";
    auto it = data.find(key.name);
    if (it == data.end() || !it->is_string()) {
      continue;
    }
    // The API server only stores valid base64; should it ever not be, the raw text goes to
    // validation, which reports the part as unparsable.
    auto decoded = Base64Decode(it->get<std::string>());
    *key.content = decoded ? std::move(*decoded) : it->get<std::string>();
  }
  return pair;
}

}  // namespace certctl::controller
