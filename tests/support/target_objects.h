#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace certctl::testing {

// The target objects the controller tests put into a FakeClient, built in one place: each
// test says only what it varies (where an entry calls, its caBundle, its failurePolicy).

// One entry of webhooks[]: by default it calls Service `svc` in `ns` on port 443.
class WebhookEntry {
 public:
  WebhookEntry(std::string name, std::string ns);

  WebhookEntry& Service(const std::string& ns, const std::string& name,
                        std::optional<std::int64_t> port = std::nullopt);
  WebhookEntry& Url(const std::string& url);
  // Replaces clientConfig, caBundle included, with `client_config` as given (malformed ones).
  WebhookEntry& ClientConfig(nlohmann::json client_config);
  // Base64 of `pem` in clientConfig.caBundle; empty PEM leaves the field out.
  WebhookEntry& Bundle(const std::string& pem);
  // clientConfig.caBundle exactly as given: "" or text that is not base64 included.
  WebhookEntry& RawBundle(const std::string& field);
  WebhookEntry& FailurePolicy(const std::string& policy);
  // rules[] as given, e.g. {{"operations", {"CREATE"}}, {"apiGroups", {""}}, ...}.
  WebhookEntry& Rules(nlohmann::json rules);
  WebhookEntry& TimeoutSeconds(int seconds);
  WebhookEntry& NamespaceSelector(nlohmann::json selector);
  WebhookEntry& ObjectSelector(nlohmann::json selector);

  nlohmann::json Build() const;
  operator nlohmann::json() const { return Build(); }  // NOLINT: builder reads as the object

 private:
  nlohmann::json entry_;
};

// A Validating- or MutatingWebhookConfiguration (the kinds share the layout).
nlohmann::json WebhookConfiguration(const std::string& name, std::vector<nlohmann::json> webhooks,
                                    nlohmann::json labels = nlohmann::json::object());

// A CRD converted by a webhook at `client_config`, e.g. {"service": {...}} or {"url": ...}.
nlohmann::json ConversionCrd(const std::string& name, nlohmann::json client_config,
                             const std::string& bundle_pem = "");

// An APIService served by `service` (an object such as {"namespace", "name", "port"}).
nlohmann::json ApiService(const std::string& name, nlohmann::json service,
                          const std::string& bundle_pem = "");

}  // namespace certctl::testing
