#include "support/target_objects.h"

#include "certctl/util/base64.h"

namespace certctl::testing {

using Json = nlohmann::json;

WebhookEntry::WebhookEntry(std::string name, std::string ns)
    : entry_({{"name", std::move(name)},
              {"clientConfig", {{"service", {{"namespace", std::move(ns)}, {"name", "svc"}}}}},
              {"rules", {{{"operations", {"CREATE"}}, {"resources", {"pods"}}}}},
              {"failurePolicy", "Fail"},
              {"sideEffects", "None"},
              {"admissionReviewVersions", {"v1"}}}) {}

WebhookEntry& WebhookEntry::Service(const std::string& ns, const std::string& name,
                                    std::optional<std::int64_t> port) {
  Json service = {{"namespace", ns}, {"name", name}};
  if (port) {
    service["port"] = *port;
  }
  entry_["clientConfig"].erase("url");
  entry_["clientConfig"]["service"] = std::move(service);
  return *this;
}

WebhookEntry& WebhookEntry::Url(const std::string& url) {
  entry_["clientConfig"].erase("service");
  entry_["clientConfig"]["url"] = url;
  return *this;
}

WebhookEntry& WebhookEntry::ClientConfig(Json client_config) {
  entry_["clientConfig"] = std::move(client_config);
  return *this;
}

WebhookEntry& WebhookEntry::Bundle(const std::string& pem) {
  if (pem.empty()) {
    entry_["clientConfig"].erase("caBundle");
  } else {
    entry_["clientConfig"]["caBundle"] = Base64Encode(pem);
  }
  return *this;
}

WebhookEntry& WebhookEntry::RawBundle(const std::string& field) {
  entry_["clientConfig"]["caBundle"] = field;
  return *this;
}

WebhookEntry& WebhookEntry::FailurePolicy(const std::string& policy) {
  entry_["failurePolicy"] = policy;
  return *this;
}

WebhookEntry& WebhookEntry::Rules(Json rules) {
  entry_["rules"] = std::move(rules);
  return *this;
}

WebhookEntry& WebhookEntry::TimeoutSeconds(int seconds) {
  entry_["timeoutSeconds"] = seconds;
  return *this;
}

WebhookEntry& WebhookEntry::NamespaceSelector(Json selector) {
  entry_["namespaceSelector"] = std::move(selector);
  return *this;
}

WebhookEntry& WebhookEntry::ObjectSelector(Json selector) {
  entry_["objectSelector"] = std::move(selector);
  return *this;
}

Json WebhookEntry::Build() const { return entry_; }

Json WebhookConfiguration(const std::string& name, std::vector<Json> webhooks, Json labels) {
  return {{"metadata", {{"name", name}, {"labels", std::move(labels)}}},
          {"webhooks", std::move(webhooks)}};
}

Json ConversionCrd(const std::string& name, Json client_config, const std::string& bundle_pem) {
  if (!bundle_pem.empty()) {
    client_config["caBundle"] = Base64Encode(bundle_pem);
  }
  return {
      {"metadata", {{"name", name}}},
      {"spec",
       {{"group", name.substr(name.find('.') + 1)},
        {"conversion",
         {{"strategy", "Webhook"},
          {"webhook",
           {{"clientConfig", std::move(client_config)}, {"conversionReviewVersions", {"v1"}}}}}}}}};
}

Json ApiService(const std::string& name, Json service, const std::string& bundle_pem) {
  Json spec = {{"group", name.substr(name.find('.') + 1)},
               {"version", name.substr(0, name.find('.'))},
               {"service", std::move(service)},
               {"groupPriorityMinimum", 100},
               {"versionPriority", 15}};
  if (!bundle_pem.empty()) {
    spec["caBundle"] = Base64Encode(bundle_pem);
  }
  return {{"metadata", {{"name", name}}}, {"spec", std::move(spec)}};
}

}  // namespace certctl::testing
