#pragma once

#include <chrono>
#include <filesystem>
#include <string>

#include "certctl/kube/client.h"
#include "certctl/loop/pass.h"

#include "support/target_objects.h"

// What the loop tests share: one webhook "hook" in namespace "infra" and the Secret for it.
namespace certctl::loop::fixtures {

inline constexpr char kNs[] = "infra";
inline constexpr char kSecret[] = "webhook-server-cert";

// A configuration as applied from a manifest: no caBundle yet.
inline kube::Json Vwc(const std::string& name = "hook") {
  return testing::WebhookConfiguration(
      name, {testing::WebhookEntry("a.hook.io", kNs).Service(kNs, "hook")});
}

// The Secret for service "hook", injected into the VWC "hook", kept in `cert_dir`.
inline PassConfig HookPass(const std::filesystem::path& cert_dir) {
  constexpr auto kDay = std::chrono::hours(24);
  PassConfig config;
  config.secret.ns = kNs;
  config.secret.name = kSecret;
  config.secret.identity.service = "hook";
  config.secret.identity.namespace_name = kNs;
  config.secret.ca.common_name = "hook-ca";
  config.secret.ca.validity = 365 * kDay;
  config.secret.leaf_validity = 90 * kDay;
  config.targets.validating_webhooks = {"hook"};
  config.cert_dir = cert_dir;
  return config;
}

}  // namespace certctl::loop::fixtures
