// The readiness check `serving`: the API server's handshake with the webhook, repeated.
#include <algorithm>

#include "certctl/loop/sidecar.h"
#include "certctl/probe/handshake.h"

namespace certctl::loop {
namespace {

using std::chrono::milliseconds;

// How soon again after a failure (from 100 ms, doubling: the webhook usually starts just
// after its certificate appears), and how often once it holds (so a webhook that stopped
// serving drops readiness).
constexpr milliseconds kServingFirstRetry{100};
constexpr milliseconds kServingRetry{1000};
constexpr milliseconds kServingRecheck{5000};

}  // namespace

void Sidecar::SetServingReadiness(bool ready, const std::string& reason) {
  const std::lock_guard lock(state_mutex_);
  const bool was_ready = ReadyLocked();
  const bool changed = ready != serving_->ok || reason != serving_->reason;
  serving_->ok = ready;
  serving_->reason = reason;
  serving_passed_ = serving_passed_ || ready;
  // The last check to pass: the failurePolicy waits for it, and is the loop's to write.
  if (config_.fail_closed_once_ready && ready && !was_ready && ReadyLocked()) {
    trigger_.Request("ready by every check");
  }
  if (changed && certificate_.ok) {
    // Until the webhook first answers, failing is how it starts (it starts after certctl):
    // worth a line, not a warning.
    log_(ready || !serving_passed_ ? LogLevel::kInfo : LogLevel::kWarning,
         ready ? "the webhook at " + FormatHostPort(config_.serving->address) +
                     " verifies against the targets' caBundle"
               : "serving check: " + reason);
  }
  PublishReadiness(was_ready);
}

void Sidecar::ServingLoop() {
  const ServingCheck& check = *config_.serving;
  milliseconds retry = kServingFirstRetry;
  while (!stopping_) {
    std::vector<std::string> bundles;
    bool certificate_ready = false;
    {
      const std::lock_guard lock(state_mutex_);
      certificate_ready = certificate_.ok;
      bundles = target_bundles_;
    }
    bool ok = false;
    std::string reason = "waiting for the certificate";
    if (certificate_ready && !bundles.empty()) {
      ok = true;
      reason.clear();
      // Every bundle a target holds must verify: the API server uses each target's own.
      for (const std::string& bundle : bundles) {
        if (auto verified =
                probe::VerifyHandshake(check.address, check.server_name, bundle, check.timeout);
            !verified) {
          ok = false;
          reason = verified.error().message();
          break;
        }
      }
    }
    SetServingReadiness(ok, reason);
    const milliseconds next = ok ? kServingRecheck : retry;
    retry = ok ? kServingFirstRetry : std::min(retry * 2, kServingRetry);
    std::unique_lock lock(stop_mutex_);
    stop_changed_.wait_for(lock, next, [this] { return stopping_.load() || serving_probe_due_; });
    serving_probe_due_ = false;
  }
}

}  // namespace certctl::loop
