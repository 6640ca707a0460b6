#include "certctl/fleet/requests.h"

#include <algorithm>

#include "certctl/controller/rotation.h"
#include "certctl/controller/targets.h"
#include "certctl/kube/names.h"
#include "certctl/pki/names.h"
#include "certctl/util/text.h"

namespace certctl::fleet {
namespace {

using Json = nlohmann::json;

const Json* Metadata(const Json& object) {
  const auto found = object.find("metadata");
  return found != object.end() && found->is_object() ? &*found : nullptr;
}

// The annotation's value: nullopt when absent; a value that is not a string is told.
struct Annotation {
  std::optional<std::string> value;
  std::optional<std::string> problem;
};

Annotation ReadAnnotation(const Json& object, const std::string& described, const char* key) {
  auto value = controller::SecretAnnotation(object, described, key);
  if (!value) {
    return {std::nullopt, value.error().message()};
  }
  return {std::move(*value), std::nullopt};
}

std::string Trimmed(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) {
    return "";
  }
  return std::string(text.substr(first, text.find_last_not_of(" \t") - first + 1));
}

std::vector<std::string> SplitCommas(std::string_view text) {
  std::vector<std::string> parts;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    std::string part = Trimmed(text.substr(0, comma));
    if (!part.empty() && std::find(parts.begin(), parts.end(), part) == parts.end()) {
      parts.push_back(std::move(part));
    }
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  return parts;
}

}  // namespace

std::string MetadataField(const Json& object, const char* field) {
  const Json* metadata = Metadata(object);
  if (metadata == nullptr) {
    return "";
  }
  const auto found = metadata->find(field);
  return found != metadata->end() && found->is_string() ? found->get<std::string>() : "";
}

std::string NamespacedKey(const std::string& ns, const std::string& name) {
  return ns + "/" + name;
}

std::pair<std::string, std::string> SplitNamespacedKey(std::string_view key) {
  const std::size_t slash = key.find('/');
  return {std::string(key.substr(0, slash)), std::string(key.substr(slash + 1))};
}

Reading<CertificateRequest> ReadCertificateRequest(const Json& service) {
  const std::string ns = MetadataField(service, "namespace");
  const std::string name = MetadataField(service, "name");
  const std::string described = "service/" + NamespacedKey(ns, name);
  Annotation secret = ReadAnnotation(service, described, kServingCertSecretAnnotation);
  if (secret.problem || !secret.value) {
    return {std::nullopt, secret.problem};
  }
  const std::string secret_name = Trimmed(*secret.value);
  if (auto valid = kube::ValidateSubdomainName(secret_name); !valid) {
    return {std::nullopt, described + ": annotation " + kServingCertSecretAnnotation + " is " +
                              Quoted(*secret.value) + ", not a Secret name (" +
                              kube::kSubdomainRule + ")"};
  }
  CertificateRequest request{.ns = ns,
                             .service = name,
                             .secret = secret_name,
                             .dns_names = {},
                             .uid = MetadataField(service, "uid")};
  Annotation names = ReadAnnotation(service, described, kDnsNamesAnnotation);
  if (names.problem) {
    return {std::nullopt, names.problem};
  }
  for (std::string& entry : SplitCommas(names.value.value_or(""))) {
    if (!pki::ValidateIpAddress(entry) && !pki::ValidateDnsName(entry, pki::Wildcard::kAllow)) {
      return {std::nullopt, described + ": annotation " + kDnsNamesAnnotation + " holds " +
                                Quoted(entry) + ", which is neither a DNS name nor an IP address"};
    }
    request.dns_names.push_back(std::move(entry));
  }
  return {std::move(request), std::nullopt};
}

Reading<InjectionRequest> ReadInjectionRequest(inject::TargetKind kind, const Json& target,
                                               bool cert_manager_annotations) {
  const std::string name = MetadataField(target, "name");
  const std::string described = controller::TargetObjectName(kind, name);
  const char* key = kInjectCaFromAnnotation;
  Annotation from = ReadAnnotation(target, described, key);
  if (!from.problem && !from.value && cert_manager_annotations) {
    key = kCertManagerInjectCaFromSecretAnnotation;
    from = ReadAnnotation(target, described, key);
  }
  if (from.problem || !from.value) {
    return {std::nullopt, from.problem};
  }
  const std::string value = Trimmed(*from.value);
  const std::size_t slash = value.find('/');
  const std::string secret_ns = value.substr(0, slash);
  const std::string secret = slash == std::string::npos ? "" : value.substr(slash + 1);
  if (slash == std::string::npos || secret.find('/') != std::string::npos ||
      !kube::ValidateLabelName(secret_ns) || !kube::ValidateSubdomainName(secret)) {
    return {std::nullopt, described + ": annotation " + key + " is " + Quoted(*from.value) +
                              ", not NAMESPACE/SECRET (a namespace name, a slash and a Secret "
                              "name)"};
  }
  InjectionRequest request{.kind = kind,
                           .name = name,
                           .secret_ns = secret_ns,
                           .secret = secret,
                           .annotation = key,
                           .fail_once_ready = false,
                           .uid = MetadataField(target, "uid")};
  Annotation policy = ReadAnnotation(target, described, kFailurePolicyOnceReadyAnnotation);
  if (policy.problem) {
    return {std::nullopt, policy.problem};
  }
  if (policy.value) {
    const bool webhooks = kind == inject::TargetKind::kValidatingWebhookConfiguration ||
                          kind == inject::TargetKind::kMutatingWebhookConfiguration;
    if (*policy.value != "Fail" && *policy.value != "Ignore") {
      return {std::nullopt, described + ": annotation " + kFailurePolicyOnceReadyAnnotation +
                                " is " + Quoted(*policy.value) + ", expected Fail or Ignore"};
    }
    if (!webhooks) {
      return {std::nullopt, described + ": annotation " + kFailurePolicyOnceReadyAnnotation +
                                " is for webhook configurations; a " +
                                std::string(inject::TargetKindName(kind)) +
                                " has no failurePolicy"};
    }
    request.fail_once_ready = *policy.value == "Fail";
  }
  return {std::move(request), std::nullopt};
}

bool AllowsDirectInjection(const Json& secret) {
  const Annotation allowed = ReadAnnotation(secret, "", kAllowDirectInjectionAnnotation);
  return allowed.value && *allowed.value == "true";
}

}  // namespace certctl::fleet
