// What objects ask `certctl controller` for, by annotation (one controller for every webhook
// of a cluster): a Service asks for a managed Secret holding a serving certificate for its
// names; a webhook configuration, CRD or APIService asks for a Secret's CA in its caBundles.
// Pure functions over the objects as read: an annotation that cannot be honoured is a
// problem naming the object and the annotation, never a guess.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "certctl/inject/targets.h"

namespace certctl::fleet {

// On a Service: the name of the Secret, in the Service's namespace, to hold its certificate.
inline constexpr char kServingCertSecretAnnotation[] = "certctl.io/serving-cert-secret";
// On that Service: DNS names and IP addresses the certificate names beside the Service's own,
// comma-separated.
inline constexpr char kDnsNamesAnnotation[] = "certctl.io/dns-names";
// On a target: NAMESPACE/SECRET whose ca.crt goes into every caBundle it has.
inline constexpr char kInjectCaFromAnnotation[] = "certctl.io/inject-ca-from";
// cert-manager's cainjector's own, honoured with --cert-manager-annotations...
inline constexpr char kCertManagerInjectCaFromSecretAnnotation[] =
    "cert-manager.io/inject-ca-from-secret";
// ...only from a Secret carrying this annotation with the value "true", as cainjector asks.
inline constexpr char kAllowDirectInjectionAnnotation[] = "cert-manager.io/allow-direct-injection";
// On a webhook configuration: "Fail" sets failurePolicy Fail on its entries once callable.
inline constexpr char kFailurePolicyOnceReadyAnnotation[] = "certctl.io/failure-policy-once-ready";

// metadata.<field> of an object as read, when a string; else empty.
std::string MetadataField(const nlohmann::json& object, const char* field);

// "namespace/name", the key of a namespaced object.
std::string NamespacedKey(const std::string& ns, const std::string& name);
// Its namespace and name again.
std::pair<std::string, std::string> SplitNamespacedKey(std::string_view key);

// A Service's request for a serving certificate.
struct CertificateRequest {
  std::string ns;
  std::string service;
  std::string secret;                  // in `ns`
  std::vector<std::string> dns_names;  // DNS names and IP addresses, as annotated
  std::string uid;                     // the Service's, for Events about it

  bool operator==(const CertificateRequest&) const = default;
};

// A target's request for a Secret's CA.
struct InjectionRequest {
  inject::TargetKind kind = inject::TargetKind::kValidatingWebhookConfiguration;
  std::string name;
  std::string secret_ns;
  std::string secret;
  const char* annotation = kInjectCaFromAnnotation;  // which one asked
  bool fail_once_ready = false;                      // kFailurePolicyOnceReadyAnnotation
  std::string uid;                                   // the target's, for Events about it

  bool operator==(const InjectionRequest&) const = default;
};

// What an object's annotations ask for: a request, or why its annotation cannot be honoured
// (the object and the annotation named), or neither when it carries none of them.
template <typename Request>
struct Reading {
  std::optional<Request> request;
  std::optional<std::string> problem;
};

// The Service's request. Problems: a Secret name that is not a DNS-1123 subdomain, a name in
// kDnsNamesAnnotation that is neither a DNS name nor an IP address, an annotation that is not
// a string.
Reading<CertificateRequest> ReadCertificateRequest(const nlohmann::json& service);

// The target's request. kInjectCaFromAnnotation wins over cert-manager's, which is read only
// with `cert_manager_annotations`. Problems: a value that is not NAMESPACE/NAME with a
// DNS-1123 label and subdomain, a kFailurePolicyOnceReadyAnnotation other than "Fail" or
// "Ignore", on a kind without failurePolicy.
Reading<InjectionRequest> ReadInjectionRequest(inject::TargetKind kind,
                                               const nlohmann::json& target,
                                               bool cert_manager_annotations);

// cainjector's rule for cert-manager.io/inject-ca-from-secret: the Secret allows it.
bool AllowsDirectInjection(const nlohmann::json& secret);

}  // namespace certctl::fleet
