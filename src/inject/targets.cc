#include "certctl/inject/targets.h"

#include "certctl/util/base64.h"

#include "inject/json_member.h"

namespace certctl::inject {
namespace {

using Json = nlohmann::json;

using internal::Member;

std::string ObjectName(const Json& object) {
  const Json* metadata = Member(object, "metadata");
  const Json* name = metadata != nullptr ? Member(*metadata, "name") : nullptr;
  return name != nullptr && name->is_string() ? name->get<std::string>() : "<unnamed>";
}

// Decodes holder.caBundle; absent or null counts as empty.
Result<std::string> DecodeBundle(const Json& holder, std::string_view where) {
  auto it = holder.find("caBundle");
  if (it == holder.end() || it->is_null()) {
    return std::string();
  }
  if (!it->is_string()) {
    return Fail(ErrorCode::kInvalidArgument, std::string(where) + ".caBundle is not a string");
  }
  auto decoded = Base64Decode(it->get<std::string>());
  if (!decoded) {
    return Fail(decoded.error().Wrap(std::string(where) + ".caBundle"));
  }
  return std::move(*decoded);
}

Result<std::vector<BundleSlot>> WebhookSlots(TargetKind kind, const Json& object) {
  const std::string subject = std::string(TargetKindName(kind)) + " " + ObjectName(object);
  const Json* webhooks = Member(object, "webhooks");
  if (webhooks == nullptr || !webhooks->is_array() || webhooks->empty()) {
    return Fail(ErrorCode::kInvalidArgument, subject + " has no webhooks");
  }
  std::vector<BundleSlot> slots;
  for (std::size_t i = 0; i < webhooks->size(); ++i) {
    const Json& webhook = (*webhooks)[i];
    const Json* name = Member(webhook, "name");
    BundleSlot slot;
    slot.webhook = name != nullptr && name->is_string() ? name->get<std::string>() : "";
    slot.path = "/webhooks/" + std::to_string(i) + "/clientConfig/caBundle";
    const Json* client_config = Member(webhook, "clientConfig");
    if (client_config == nullptr || !client_config->is_object()) {
      return Fail(ErrorCode::kInvalidArgument,
                  subject + ": webhooks[" + std::to_string(i) + "] has no clientConfig");
    }
    auto bundle = DecodeBundle(*client_config,
                               subject + ": webhooks[" + std::to_string(i) + "].clientConfig");
    if (!bundle) {
      return Fail(bundle.error());
    }
    slot.bundle = std::move(*bundle);
    slots.push_back(std::move(slot));
  }
  return slots;
}

}  // namespace

std::string_view TargetKindName(TargetKind kind) {
  switch (kind) {
    case TargetKind::kValidatingWebhookConfiguration:
      return "ValidatingWebhookConfiguration";
    case TargetKind::kMutatingWebhookConfiguration:
      return "MutatingWebhookConfiguration";
    case TargetKind::kCustomResourceDefinition:
      return "CustomResourceDefinition";
    case TargetKind::kApiService:
      return "APIService";
  }
  return "Unknown";
}

Result<std::vector<BundleSlot>> ReadBundleSlots(TargetKind kind, const Json& object) {
  const std::string subject = std::string(TargetKindName(kind)) + " " + ObjectName(object);
  switch (kind) {
    case TargetKind::kValidatingWebhookConfiguration:
    case TargetKind::kMutatingWebhookConfiguration:
      return WebhookSlots(kind, object);
    case TargetKind::kCustomResourceDefinition: {
      const Json* spec = Member(object, "spec");
      const Json* conversion = spec != nullptr ? Member(*spec, "conversion") : nullptr;
      const Json* strategy = conversion != nullptr ? Member(*conversion, "strategy") : nullptr;
      if (strategy == nullptr || *strategy != "Webhook") {
        return Fail(ErrorCode::kInvalidArgument,
                    subject + ": spec.conversion.strategy is not Webhook, so it has no caBundle");
      }
      const Json* webhook = Member(*conversion, "webhook");
      const Json* client_config = webhook != nullptr ? Member(*webhook, "clientConfig") : nullptr;
      if (client_config == nullptr || !client_config->is_object()) {
        return Fail(ErrorCode::kInvalidArgument,
                    subject + " has no spec.conversion.webhook.clientConfig");
      }
      auto bundle =
          DecodeBundle(*client_config, subject + ": spec.conversion.webhook.clientConfig");
      if (!bundle) {
        return Fail(bundle.error());
      }
      return std::vector<BundleSlot>{
          {"", "/spec/conversion/webhook/clientConfig/caBundle", std::move(*bundle)}};
    }
    case TargetKind::kApiService: {
      const Json* spec = Member(object, "spec");
      if (spec == nullptr || !spec->is_object()) {
        return Fail(ErrorCode::kInvalidArgument, subject + " has no spec");
      }
      auto bundle = DecodeBundle(*spec, subject + ": spec");
      if (!bundle) {
        return Fail(bundle.error());
      }
      return std::vector<BundleSlot>{{"", "/spec/caBundle", std::move(*bundle)}};
    }
  }
  return Fail(ErrorCode::kInternal, "unknown target kind");
}

}  // namespace certctl::inject
