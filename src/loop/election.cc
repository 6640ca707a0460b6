// The sidecar's leader election: the Lease tried and renewed on a thread of its own.
#include "certctl/loop/sidecar.h"

namespace certctl::loop {

void Sidecar::ElectionAttempt() {
  auto attempt = elector_->TryAcquireOrRenew();
  const bool now_leading = elector_->IsLeader();
  if (!attempt) {
    WarnRateLimited("lease", "leader election: " + attempt.error().message());
  }
  if (now_leading != leading_.exchange(now_leading)) {
    metrics_.leader.Set({}, now_leading ? 1 : 0);
    log_(LogLevel::kInfo, now_leading
                              ? "became the leader (" + config_.election->identity + ")"
                              : "stopped leading; following " + elector_->observed_holder());
    trigger_.Request(now_leading ? "became the leader" : "stopped leading");
  }
}

void Sidecar::ElectionLoop() {
  // Run made the first attempt before the first pass.
  while (!stopping_) {
    if (SleepUnlessStopped(elector_->NextAttemptIn())) {
      break;
    }
    ElectionAttempt();
  }
  if (auto released = elector_->Release(); !released) {
    log_(LogLevel::kWarning, "releasing the lease: " + released.error().message());
  } else if (leading_) {
    log_(LogLevel::kInfo, "released the lease");
  }
}

}  // namespace certctl::loop
