#include "certctl/controller/targets.h"

#include <algorithm>
#include <set>

#include "certctl/inject/called_names.h"
#include "certctl/kube/object.h"
#include "certctl/util/text.h"

namespace certctl::controller {
namespace {

using inject::TargetKind;

}  // namespace

constexpr int kMaxPatchAttempts = 5;

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
  return AsciiLower(inject::TargetKindName(kind)) + "/" + std::string(name);
}

ObjectReference ReferenceOf(const TargetObject& target) {
  const kube::ResourceType& type = ResourceFor(target.kind);
  const std::string object = TargetObjectName(target.kind, target.name);
  return {type.group.empty() ? std::string(type.version)
                             : std::string(type.group) + "/" + std::string(type.version),
          std::string(type.kind), "", target.name,
          kube::OptionalString(target.object, "/metadata/uid", object)
              .value_or(std::nullopt)
              .value_or("")};
}

Result<std::optional<nlohmann::json>> PatchTarget(kube::Client& client, TargetObject target,
                                                  const PatchMaker& make_patch) {
  const kube::ResourceType& type = ResourceFor(target.kind);
  const std::string object = TargetObjectName(target.kind, target.name);
  for (int attempt = 0; attempt < kMaxPatchAttempts; ++attempt) {
    auto patch = make_patch(target.object);
    if (!patch) {
      return Fail(patch.error());
    }
    if (!*patch) {
      return std::optional<nlohmann::json>();
    }
    auto patched = client.Patch(type, "", target.name, kube::PatchType::kJsonPatch, **patch);
    if (patched) {
      return std::move(*patch);
    }
    // A failed `test` (the entries moved) is 422 Invalid; both it and a conflict mean the
    // object changed underneath: read it again and recompute.
    const ErrorCode code = patched.error().code();
    if (code != ErrorCode::kInvalidArgument && code != ErrorCode::kConflict) {
      return Fail(patched.error().Wrap("patch " + object));
    }
    auto fresh = client.Get(type, "", target.name);
    if (!fresh) {
      return Fail(fresh.error().Wrap("get " + object));
    }
    if (!fresh->has_value()) {
      return Fail(ErrorCode::kNotFound, object + " was deleted while it was written");
    }
    // Unchanged, the object cannot have failed the patch's `test`: the server refused the
    // patch itself (a validating admission policy, say), and trying again would not help.
    const auto fresh_version = kube::ResourceVersion(**fresh, object);
    const auto read_version = kube::ResourceVersion(target.object, object);
    if (code == ErrorCode::kInvalidArgument && fresh_version && read_version &&
        !fresh_version->empty() && *fresh_version == *read_version) {
      return Fail(patched.error().Wrap("patch " + object));
    }
    target.object = std::move(**fresh);
  }
  return Fail(ErrorCode::kConflict, object + " kept changing under us; gave up after " +
                                        std::to_string(kMaxPatchAttempts) + " attempts");
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
    auto selected = ListSelectedWebhookConfigurations(client, selection.webhook_selector);
    if (!selected) {
      return Fail(selected.error());
    }
    if (selected->empty()) {
      resolved.missing.push_back(
          {FindingCode::kTargetMissing, "webhook-selector " + selection.webhook_selector,
           "no ValidatingWebhookConfiguration or MutatingWebhookConfiguration matches"});
    }
    for (TargetObject& target : *selected) {
      if (seen.insert({target.kind, target.name}).second) {
        resolved.found.push_back(std::move(target));
      }
    }
  }
  return resolved;
}

Result<std::vector<TargetObject>> ListSelectedWebhookConfigurations(kube::Client& client,
                                                                    std::string_view selector) {
  std::vector<TargetObject> selected;
  for (TargetKind kind :
       {TargetKind::kValidatingWebhookConfiguration, TargetKind::kMutatingWebhookConfiguration}) {
    const std::string what = "list " + std::string(ResourceFor(kind).resource) + " matching \"" +
                             std::string(selector) + "\"";
    kube::ListOptions options;
    options.label_selector = std::string(selector);
    auto list = client.List(ResourceFor(kind), "", options);
    if (!list) {
      return Fail(list.error().Wrap(what));
    }
    for (auto& item : (*list)["items"]) {
      auto name = kube::ObjectName(item, what);
      if (!name) {
        return Fail(name.error());
      }
      selected.push_back({kind, std::move(*name), std::move(item)});
    }
  }
  return selected;
}

std::vector<KnownBundle> BundlesOfTargets(kube::Client& client, const TargetSelection& selection) {
  std::vector<KnownBundle> bundles;
  auto resolved = ResolveTargets(client, selection);
  if (!resolved) {
    return bundles;
  }
  for (const TargetObject& target : resolved->found) {
    auto slots = inject::ReadBundleSlots(target.kind, target.object);
    if (!slots) {
      continue;
    }
    for (const inject::BundleSlot& slot : *slots) {
      const bool seen = std::any_of(bundles.begin(), bundles.end(), [&](const KnownBundle& known) {
        return known.pem == slot.bundle;
      });
      if (!slot.bundle.empty() && !seen) {
        bundles.push_back({TargetObjectName(target.kind, target.name), slot.bundle});
      }
    }
  }
  return bundles;
}

std::vector<std::string> CalledHostsOfTargets(kube::Client& client,
                                              const TargetSelection& selection) {
  std::vector<std::string> hosts;
  auto resolved = ResolveTargets(client, selection);
  if (!resolved) {
    return hosts;
  }
  for (const TargetObject& target : resolved->found) {
    for (const inject::CalledEndpoint& endpoint :
         inject::ReadCalledEndpoints(target.kind, target.object)) {
      if (!endpoint.host.empty() && endpoint.verified &&
          std::find(hosts.begin(), hosts.end(), endpoint.host) == hosts.end()) {
        hosts.push_back(endpoint.host);
      }
    }
  }
  return hosts;
}

}  // namespace certctl::controller
