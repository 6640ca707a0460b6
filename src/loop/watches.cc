// The sidecar's watches: one ListWatch per object or selector, each event a pass.
#include <algorithm>

#include "certctl/controller/secret.h"
#include "certctl/controller/targets.h"
#include "certctl/kube/list_watch.h"
#include "certctl/loop/sidecar.h"

#include "loop/sidecar_internal.h"

namespace certctl::loop {
namespace {

using internal::kMaxBackoff;
using std::chrono::milliseconds;

constexpr milliseconds kWatchFirstBackoff{1000};

}  // namespace

std::vector<Sidecar::WatchSpec> Sidecar::Watches() const {
  std::vector<WatchSpec> watches;
  const auto by_name = [](std::string_view name) {
    kube::ListOptions options;
    options.field_selector = "metadata.name=" + std::string(name);
    return options;
  };
  const auto& secret = config_.pass.secret;
  watches.push_back({&kube::kSecrets, secret.ns, by_name(secret.name),
                     controller::SecretObjectName(secret.ns, secret.name)});
  const auto& targets = config_.pass.targets;
  const auto add_named = [&](inject::TargetKind kind, const std::vector<std::string>& names) {
    for (const std::string& name : names) {
      watches.push_back({&controller::ResourceFor(kind), "", by_name(name),
                         controller::TargetObjectName(kind, name)});
    }
  };
  add_named(inject::TargetKind::kValidatingWebhookConfiguration, targets.validating_webhooks);
  add_named(inject::TargetKind::kMutatingWebhookConfiguration, targets.mutating_webhooks);
  add_named(inject::TargetKind::kCustomResourceDefinition, targets.crds);
  add_named(inject::TargetKind::kApiService, targets.api_services);
  if (!targets.webhook_selector.empty()) {
    for (const auto* type :
         {&kube::kValidatingWebhookConfigurations, &kube::kMutatingWebhookConfigurations}) {
      kube::ListOptions options;
      options.label_selector = targets.webhook_selector;
      watches.push_back(
          {type, "", options, std::string(type->resource) + " " + targets.webhook_selector});
    }
  }
  return watches;
}

void Sidecar::WatchLoop(const WatchSpec& spec) {
  kube::ListWatchOptions options;
  options.list = spec.list;
  options.server_timeout = config_.watch_timeout;
  bool failing = false;
  const auto set_failing = [&](bool now_failing) {
    if (now_failing != failing) {
      failing = now_failing;
      failing_watches_ += failing ? 1 : -1;
    }
  };
  kube::ListWatchHandlers handlers;
  handlers.on_list = [&](const std::vector<kube::Json>&, const std::string&) {
    set_failing(false);
    trigger_.Request("listed " + spec.what);
  };
  handlers.on_event = [&](const kube::WatchEvent& event) {
    set_failing(false);
    const char* change = event.type == kube::WatchEventType::kAdded     ? "added"
                         : event.type == kube::WatchEventType::kDeleted ? "deleted"
                                                                        : "modified";
    trigger_.Request(spec.what + " " + change);
  };
  handlers.on_retry = [&](const Error& error, milliseconds delay) {
    set_failing(true);
    log_(LogLevel::kDebug, "watch " + spec.what + ": " + error.message() + "; again in " +
                               std::to_string(delay.count()) + "ms");
  };
  milliseconds backoff = kWatchFirstBackoff;
  while (!stopping_) {
    auto ended = kube::ListWatch(
        client_, *spec.type, spec.ns, options, handlers, [this] { return stopping_.load(); },
        clock_);
    if (stopping_) {
      set_failing(false);
      return;
    }
    set_failing(true);
    // Only failures a retry cannot fix end ListWatch (403, 401, a bad answer); RBAC or
    // credentials may be fixed while certctl runs, so keep trying, and keep saying why.
    WarnRateLimited("watch " + spec.what,
                    "watch " + spec.what + ": " +
                        (ended ? std::string("ended") : ended.error().message()) + "; retrying");
    if (SleepUnlessStopped(Jittered(backoff, 0.5))) {
      break;
    }
    backoff = std::min(backoff * 2, ended ? kMaxBackoff : internal::MaxBackoffAfter(ended.error()));
  }
  set_failing(false);
}

}  // namespace certctl::loop
