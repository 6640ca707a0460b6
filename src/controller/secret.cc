#include "certctl/controller/secret.h"

#include "certctl/controller/issuer.h"
#include "certctl/controller/rotation.h"
#include "certctl/controller/rotation_check.h"
#include "certctl/kube/object.h"
#include "certctl/util/base64.h"

namespace certctl::controller {

std::string SecretObjectName(std::string_view ns, std::string_view name) {
  return "secret/" + std::string(ns) + "/" + std::string(name);
}

Result<SecretPair> ReadSecretPair(const nlohmann::json& secret) {
  if (!secret.is_object()) {
    return Fail(ErrorCode::kBadResponse, "the server answered with a Secret that is not an object");
  }
  // Name the Secret as well as its own fields allow; the checks below name what is wrong.
  const auto name = kube::OptionalString(secret, "/metadata/name", "secret");
  if (!name) {
    return Fail(name.error());
  }
  const auto ns =
      kube::OptionalString(secret, "/metadata/namespace", "secret/" + name->value_or(""));
  if (!ns) {
    return Fail(ns.error());
  }
  const std::string object = SecretObjectName(ns->value_or(""), name->value_or(""));
  if (auto version = kube::ResourceVersion(secret, object); !version) {
    return Fail(version.error());
  }
  SecretPair pair;
  auto type = kube::OptionalString(secret, "/type", object);
  if (!type) {
    return Fail(type.error());
  }
  pair.type = type->value_or("Opaque");
  auto labels = kube::OptionalObject(secret, "/metadata/labels", object);
  if (!labels) {
    return Fail(labels.error());
  }
  if (*labels != nullptr) {
    // The label's key holds a slash, which a pointer would split: looked up directly.
    const auto managed_by = (*labels)->find(kManagedByLabel);
    if (managed_by != (*labels)->end() && !managed_by->is_null()) {
      if (!managed_by->is_string()) {
        return Fail(ErrorCode::kBadResponse,
                    object + ": metadata.labels[" + kManagedByLabel + "] is not a string");
      }
      pair.managed = *managed_by == kManagedByValue;
    }
  }
  if (pair.type != kTlsSecretType) {
    pair.findings.push_back({FindingCode::kWrongType, object,
                             "type is \"" + pair.type + "\", expected \"" + kTlsSecretType + "\""});
  }
  auto data = kube::OptionalObject(secret, "/data", object);
  if (!data) {
    return Fail(data.error());
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
  for (const Key& key : keys) {
    *key.label = object + "[" + key.name + "]";
    if (*data == nullptr) {
      continue;
    }
    // Key names hold dots, never slashes, so they are plain pointer tokens.
    auto value = kube::OptionalString(secret, "/data/" + std::string(key.name), object);
    if (!value) {
      return Fail(value.error());
    }
    if (!*value) {
      continue;
    }
    // The API server only stores valid base64: an answer that is not is refused, never read
    // as a broken certificate (which would make certctl replace a CA it cannot see).
    auto decoded = Base64Decode(**value);
    if (!decoded) {
      return Fail(ErrorCode::kBadResponse, object + ": data[" + key.name + "] is not base64 (" +
                                               decoded.error().message() + ")");
    }
    *key.content = std::move(*decoded);
  }
  return pair;
}

Result<std::optional<StoredSecret>> ReadStoredSecret(kube::Client& client, std::string_view ns,
                                                     std::string_view name,
                                                     const pki::ValidationPolicy& policy,
                                                     std::chrono::seconds ca_overlap,
                                                     TimePoint now) {
  auto object = client.Get(kube::kSecrets, ns, name);
  if (!object) {
    return Fail(object.error().Wrap("get " + SecretObjectName(ns, name)));
  }
  if (!object->has_value()) {
    return std::optional<StoredSecret>();
  }
  auto pair = ReadSecretPair(**object);
  if (!pair) {
    return Fail(pair.error());
  }
  // Rotation annotations are certctl's own only on a Secret it manages; on any other Secret
  // they are somebody else's, ignored here as EnsureSecret ignores them.
  RotationReading rotation;
  if (pair->managed) {
    auto read = ReadRotationAnnotations(**object, SecretObjectName(ns, name));
    if (!read) {
      return Fail(read.error());
    }
    rotation = JudgeRotationState(std::move(*read), pair->source, ca_overlap, now);
  }
  std::optional<NameRequest> name_request;
  if (pair->managed) {
    auto requested = ReadNameRequest(**object, SecretObjectName(ns, name), now);
    if (!requested) {
      return Fail(requested.error());
    }
    name_request = std::move(requested->request);
    rotation.problems.insert(rotation.problems.end(), requested->problems.begin(),
                             requested->problems.end());
  }
  StoredSecret stored{
      std::move(*pair),        {},          {}, rotation.state, std::move(rotation.problems),
      std::move(name_request), std::nullopt};
  if (stored.pair.managed) {
    stored.conflict = RecordedConflict(**object);
  }
  // While a rotation waits for the targets to trust its new CA, the leaf is still the one the
  // outgoing CA issued, which may be due for renewal: that is what the rotation is doing.
  pki::ValidationPolicy judged = policy;
  if (stored.rotation.phase == RotationPhase::kTrusting) {
    judged.renew_before = std::chrono::seconds(0);
  }
  stored.validation = pki::Validate(stored.pair.source, judged, now);
  stored.findings = stored.validation.AllFindings();
  stored.findings.insert(stored.findings.end(), stored.pair.findings.begin(),
                         stored.pair.findings.end());
  return std::optional<StoredSecret>(std::move(stored));
}

}  // namespace certctl::controller
