#include "certctl/controller/secret.h"

#include "certctl/util/base64.h"

namespace certctl::controller {

std::string SecretObjectName(std::string_view ns, std::string_view name) {
  return "secret/" + std::string(ns) + "/" + std::string(name);
}

SecretPair ReadSecretPair(const nlohmann::json& secret) {
  const nlohmann::json& metadata = secret.contains("metadata") ? secret["metadata"] : secret;
  const std::string object = SecretObjectName(metadata.value("namespace", ""),
                                              metadata.value("name", ""));
  SecretPair pair;
  pair.type = secret.value("type", "Opaque");
  if (metadata.contains("labels") && metadata["labels"].is_object()) {
    pair.managed = metadata["labels"].value(kManagedByLabel, "") == kManagedByValue;
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
  const nlohmann::json empty = nlohmann::json::object();
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
