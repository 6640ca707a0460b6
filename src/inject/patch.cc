#include "certctl/inject/patch.h"

#include "certctl/util/base64.h"

namespace certctl::inject {

Result<std::optional<nlohmann::json>> BundlePatch(TargetKind kind, const nlohmann::json& object,
                                                  const std::string& bundle_pem) {
  auto slots = ReadBundleSlots(kind, object);
  if (!slots) {
    return Fail(slots.error());
  }
  const std::string encoded = Base64Encode(bundle_pem);
  nlohmann::json operations = nlohmann::json::array();
  for (std::size_t i = 0; i < slots->size(); ++i) {
    const BundleSlot& slot = (*slots)[i];
    if (slot.bundle == bundle_pem) {
      continue;
    }
    switch (kind) {
      case TargetKind::kValidatingWebhookConfiguration:
      case TargetKind::kMutatingWebhookConfiguration:
        operations.push_back({{"op", "test"},
                              {"path", "/webhooks/" + std::to_string(i) + "/name"},
                              {"value", slot.webhook}});
        break;
      case TargetKind::kCustomResourceDefinition:
        operations.push_back(
            {{"op", "test"}, {"path", "/spec/conversion/strategy"}, {"value", "Webhook"}});
        break;
      case TargetKind::kApiService:
        // Pinned to the service it was read with: the bundle is for that server alone. (A
        // local APIService has no service and no use for a bundle; nothing to pin.)
        if (object.contains("spec") && object["spec"].is_object() &&
            object["spec"].contains("service") && object["spec"]["service"].is_object()) {
          operations.push_back(
              {{"op", "test"}, {"path", "/spec/service"}, {"value", object["spec"]["service"]}});
        }
        break;
    }
    // "add" sets an object member whether or not it exists yet.
    operations.push_back({{"op", "add"}, {"path", slot.path}, {"value", encoded}});
  }
  if (operations.empty()) {
    return std::optional<nlohmann::json>();
  }
  return std::optional<nlohmann::json>(std::move(operations));
}

std::optional<nlohmann::json> FailClosedPatch(
    TargetKind kind, const nlohmann::json& object,
    const std::function<bool(const std::string& entry)>& closable) {
  if (kind != TargetKind::kValidatingWebhookConfiguration &&
      kind != TargetKind::kMutatingWebhookConfiguration) {
    return std::nullopt;
  }
  if (!object.is_object() || !object.contains("webhooks") || !object["webhooks"].is_array()) {
    return std::nullopt;
  }
  nlohmann::json operations = nlohmann::json::array();
  const nlohmann::json& webhooks = object["webhooks"];
  for (std::size_t i = 0; i < webhooks.size(); ++i) {
    const nlohmann::json& webhook = webhooks[i];
    if (!webhook.is_object() || !webhook.contains("failurePolicy") ||
        webhook["failurePolicy"] != "Ignore" || !webhook.contains("name") ||
        !webhook["name"].is_string() ||
        (closable && !closable(webhook["name"].get<std::string>()))) {
      continue;
    }
    const std::string entry = "/webhooks/" + std::to_string(i);
    operations.push_back({{"op", "test"}, {"path", entry + "/name"}, {"value", webhook["name"]}});
    operations.push_back({{"op", "test"}, {"path", entry + "/failurePolicy"}, {"value", "Ignore"}});
    operations.push_back(
        {{"op", "replace"}, {"path", entry + "/failurePolicy"}, {"value", "Fail"}});
  }
  if (operations.empty()) {
    return std::nullopt;
  }
  return operations;
}

}  // namespace certctl::inject
