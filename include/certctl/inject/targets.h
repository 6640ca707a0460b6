#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "certctl/util/result.h"

namespace certctl::inject {

// The objects that hold a caBundle the API server trusts.
enum class TargetKind {
  kValidatingWebhookConfiguration,  // webhooks[].clientConfig.caBundle
  kMutatingWebhookConfiguration,    // webhooks[].clientConfig.caBundle
  kCustomResourceDefinition,        // spec.conversion.webhook.clientConfig.caBundle
  kApiService,                      // spec.caBundle
};

std::string_view TargetKindName(TargetKind kind);  // "ValidatingWebhookConfiguration", ...

// One caBundle field inside a target object.
struct BundleSlot {
  std::string webhook;  // webhooks[].name for webhook configurations, else empty
  std::string path;     // JSON pointer of the field: "/webhooks/0/clientConfig/caBundle"
  std::string bundle;   // decoded PEM; empty when the field is absent or empty
};

// Every caBundle slot of `object`, in document order. kInvalidArgument naming the field when
// the object cannot carry a bundle: a webhook configuration without webhooks, a CRD without a
// Webhook conversion strategy, a caBundle that is not base64.
Result<std::vector<BundleSlot>> ReadBundleSlots(TargetKind kind, const nlohmann::json& object);

}  // namespace certctl::inject
