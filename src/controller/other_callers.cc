#include "certctl/controller/other_callers.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <utility>

#include "certctl/controller/targets.h"
#include "certctl/inject/called_names.h"
#include "certctl/kube/object.h"
#include "certctl/pki/certificate.h"

namespace certctl::controller {
namespace {

using inject::TargetKind;

constexpr TargetKind kWebhookKinds[] = {TargetKind::kValidatingWebhookConfiguration,
                                        TargetKind::kMutatingWebhookConfiguration};

bool SameName(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](unsigned char x, unsigned char y) {
    return std::tolower(x) == std::tolower(y);
  });
}

// Whether `bundle` (a caBundle, decoded) holds one of the certificates of `cas`.
bool TrustsAnyOf(const std::string& bundle, const std::vector<pki::Certificate>& cas) {
  auto certificates = pki::ParseCertificateBundle(bundle);
  if (!certificates) {
    return false;
  }
  return std::any_of(certificates->begin(), certificates->end(), [&](const pki::Certificate& c) {
    return std::find(cas.begin(), cas.end(), c) != cas.end();
  });
}

// The configurations `targets` names or selects, by kind and name.
Result<std::set<std::pair<TargetKind, std::string>>> TargetNames(kube::Client& client,
                                                                 const TargetSelection& targets) {
  std::set<std::pair<TargetKind, std::string>> names;
  for (const std::string& name : targets.validating_webhooks) {
    names.insert({TargetKind::kValidatingWebhookConfiguration, name});
  }
  for (const std::string& name : targets.mutating_webhooks) {
    names.insert({TargetKind::kMutatingWebhookConfiguration, name});
  }
  if (targets.webhook_selector.empty()) {
    return names;
  }
  auto selected = ListSelectedWebhookConfigurations(client, targets.webhook_selector);
  if (!selected) {
    return Fail(selected.error());
  }
  for (TargetObject& target : *selected) {
    names.insert({target.kind, std::move(target.name)});
  }
  return names;
}

}  // namespace

std::string OtherCaller::Describe() const {
  return object + " " + field + " (" + webhook + ") calls " + host;
}

std::string BrokenCallerWarning(const OtherCaller& caller, const std::string& secret_object) {
  return "the server certificate in " + secret_object + " no longer names " + caller.host +
         ", which " + caller.object + " " + caller.field + " (" + caller.webhook +
         ") calls with this Secret's CA in its caBundle: that webhook's calls now fail the API "
         "server's TLS check (give it a Secret of its own)";
}

NotLookedNotice NoticeOfNotLooked(const Error& not_looked, const std::string& secret_object) {
  return {"the server certificate in " + secret_object +
              " dropped names; webhooks outside the targets that may call them could not be "
              "looked for: " +
              not_looked.message(),
          not_looked.code() == ErrorCode::kPermissionDenied};
}

std::string DescribeOtherCallers(const std::vector<OtherCaller>& callers) {
  std::string text;
  for (const OtherCaller& caller : callers) {
    text += (text.empty() ? "" : "; ") + caller.Describe();
  }
  return text;
}

OtherCallersLook FindOtherCallers(kube::Client& client, const TargetSelection& targets,
                                  const std::vector<std::string>& dropped,
                                  const std::string& ca_bundle) {
  OtherCallersLook look;
  auto cas = pki::ParseCertificateBundle(ca_bundle);
  if (dropped.empty() || !cas || cas->empty()) {
    return look;
  }
  auto target_names = TargetNames(client, targets);
  if (!target_names) {
    look.not_looked = target_names.error();
    return look;
  }
  for (TargetKind kind : kWebhookKinds) {
    const std::string what = "list " + std::string(ResourceFor(kind).resource);
    auto list = client.List(ResourceFor(kind), "", kube::ListOptions{});
    if (!list) {
      look.found.clear();  // half a look is no look: told as such
      look.not_looked = list.error().Wrap(what);
      return look;
    }
    for (const auto& item : (*list)["items"]) {
      auto name = kube::ObjectName(item, what);
      if (!name || target_names->contains({kind, *name})) {
        continue;
      }
      // A malformed configuration is not the Secret's to judge: what can be read is.
      auto slots = inject::ReadBundleSlots(kind, item);
      const std::vector<inject::CalledEndpoint> endpoints = inject::ReadCalledEndpoints(kind, item);
      if (!slots || slots->size() != endpoints.size()) {
        continue;
      }
      for (std::size_t i = 0; i < endpoints.size(); ++i) {
        const inject::CalledEndpoint& endpoint = endpoints[i];
        if (!endpoint.service || endpoint.host.empty()) {
          continue;  // a URL names no Service of this Secret's
        }
        const auto called = std::find_if(
            dropped.begin(), dropped.end(),
            [&](const auto& dropped_name) { return SameName(dropped_name, endpoint.host); });
        if (called == dropped.end() || !TrustsAnyOf((*slots)[i].bundle, *cas)) {
          continue;
        }
        look.found.push_back({TargetObjectName(kind, *name),
                              "webhooks[" + std::to_string(endpoint.index) + "]", endpoint.entry,
                              endpoint.host});
      }
    }
  }
  return look;
}

}  // namespace certctl::controller
