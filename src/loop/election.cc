#include "certctl/loop/election.h"

#include <utility>

namespace certctl::loop {

Election::Election(kube::Client& client, const Clock& clock,
                   std::optional<leader::ElectionConfig> config, Telling telling)
    : config_(std::move(config)), telling_(std::move(telling)) {
  if (config_) {
    elector_.emplace(client, clock, *config_);
  } else {
    leading_ = true;
  }
  if (telling_.leader != nullptr) {
    telling_.leader->Set({}, leading_ ? 1 : 0);
  }
}

void Election::Attempt() {
  if (!elector_) {
    return;
  }
  auto attempt = elector_->TryAcquireOrRenew();
  const bool now_leading = elector_->IsLeader();
  if (!attempt && telling_.warn) {
    telling_.warn("lease", "leader election: " + attempt.error().message());
  }
  if (now_leading == leading_.exchange(now_leading)) {
    return;
  }
  if (telling_.leader != nullptr) {
    telling_.leader->Set({}, now_leading ? 1 : 0);
  }
  telling_.log(LogLevel::kInfo, now_leading
                                    ? "became the leader (" + config_->identity + ")"
                                    : "stopped leading; following " + elector_->observed_holder());
  if (telling_.changed) {
    telling_.changed(now_leading);
  }
}

void Election::Loop(const std::function<bool(std::chrono::milliseconds)>& sleep_unless_stopped) {
  if (!elector_) {
    return;
  }
  while (!sleep_unless_stopped(elector_->NextAttemptIn())) {
    Attempt();
  }
  if (auto released = elector_->Release(); !released) {
    telling_.log(LogLevel::kWarning, "releasing the lease: " + released.error().message());
  } else if (leading_) {
    telling_.log(LogLevel::kInfo, "released the lease");
  }
}

}  // namespace certctl::loop
