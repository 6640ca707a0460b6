#include "certctl/controller/targets.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "certctl/kube/object.h"

namespace certctl::controller {
namespace {

using inject::TargetKind;

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

bool TargetSelection::empty() const {
  return validating_webhooks.empty() && mutating_webhooks.empty() && crds.empty() &&
         api_services.empty() && webhook_selector.empty();
}

const kube::ResourceType& ResourceFor(TargetKind kind) {
  switch (kind) {
    case TargetKind::kValidatingWebhookConfiguration:
      return kube::kValidatingWebhookConfigurations;
    case TargetKind::kMutatingWebhookConfiguration:
      return kube::kMutatingWebhookConfigurations;
    case TargetKind::kCustomResourceDefinition:
      return kube::kCustomResourceDefinitions;
    case TargetKind::kApiService:
      return kube::kApiServices;
  }
  return kube::kValidatingWebhookConfigurations;
}

std::string TargetObjectName(TargetKind kind, std::string_view name) {
  return Lower(inject::TargetKindName(kind)) + "/" + std::string(name);
}

Result<ResolvedTargets> ResolveTargets(kube::Client& client, const TargetSelection& selection) {
  ResolvedTargets resolved;
  std::set<std::pair<TargetKind, std::string>> seen;
  auto add_named = [&](TargetKind kind, const std::vector<std::string>& names) -> Status {
    for (const std::string& name : names) {
      if (!seen.insert({kind, name}).second) {
        continue;
      }
      auto object = client.Get(ResourceFor(kind), "", name);
      if (!object) {
        return Fail(object.error().Wrap("get " + TargetObjectName(kind, name)));
      }
      if (!object->has_value()) {
        resolved.missing.push_back(
            {FindingCode::kTargetMissing, TargetObjectName(kind, name), "does not exist"});
        continue;
      }
      resolved.found.push_back({kind, name, std::move(**object)});
    }
    return {};
  };
  if (auto status =
          add_named(TargetKind::kValidatingWebhookConfiguration, selection.validating_webhooks);
      !status) {
    return Fail(status.error());
  }
  if (auto status =
          add_named(TargetKind::kMutatingWebhookConfiguration, selection.mutating_webhooks);
      !status) {
    return Fail(status.error());
  }
  if (auto status = add_named(TargetKind::kCustomResourceDefinition, selection.crds); !status) {
    return Fail(status.error());
  }
  if (auto status = add_named(TargetKind::kApiService, selection.api_services); !status) {
    return Fail(status.error());
  }

  if (!selection.webhook_selector.empty()) {
    std::size_t matched = 0;
    for (TargetKind kind :
         {TargetKind::kValidatingWebhookConfiguration, TargetKind::kMutatingWebhookConfiguration}) {
      kube::ListOptions options;
      options.label_selector = selection.webhook_selector;
      auto list = client.List(ResourceFor(kind), "", options);
      if (!list) {
        return Fail(list.error().Wrap("list " + std::string(ResourceFor(kind).resource) +
                                      " matching \"" + selection.webhook_selector + "\""));
      }
      for (auto& item : (*list)["items"]) {
        ++matched;
        auto name = kube::ObjectName(item, "list " + std::string(ResourceFor(kind).resource) +
                                               " matching \"" + selection.webhook_selector + "\"");
        if (!name) {
          return Fail(name.error());
        }
        if (seen.insert({kind, *name}).second) {
          resolved.found.push_back({kind, std::move(*name), std::move(item)});
        }
      }
    }
    if (matched == 0) {
      resolved.missing.push_back(
          {FindingCode::kTargetMissing, "webhook-selector " + selection.webhook_selector,
           "no ValidatingWebhookConfiguration or MutatingWebhookConfiguration matches"});
    }
  }
  return resolved;
}

}  // namespace certctl::controller
