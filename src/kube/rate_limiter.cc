#include "kube/rate_limiter.h"

#include <algorithm>
#include <cmath>

namespace certctl::kube {
namespace {

// Whole milliseconds, rounded up, for a wait of `seconds`; exact for round rates like 5 qps.
std::chrono::milliseconds ToMilliseconds(double seconds) {
  if (seconds <= 0) {
    return std::chrono::milliseconds(0);
  }
  const auto micros = std::llround(seconds * 1e6);
  return std::chrono::milliseconds((micros + 999) / 1000);
}

}  // namespace

RateLimiter::RateLimiter(double qps, int burst, const Clock& clock)
    : qps_(qps),
      burst_(static_cast<double>(std::max(burst, 1))),
      clock_(clock),
      tokens_(burst_),
      last_(clock.Now()) {}

double RateLimiter::Refill(TimePoint now) const {
  const auto elapsed = std::chrono::duration<double>(now - last_).count();
  return std::min(burst_, tokens_ + std::max(elapsed, 0.0) * qps_);
}

void RateLimiter::Acquire() {
  if (qps_ <= 0) {
    return;
  }
  std::chrono::milliseconds wait{0};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const TimePoint now = clock_.Now();
    tokens_ = Refill(now) - 1;
    last_ = std::max(last_, now);
    if (tokens_ < 0) {
      wait = ToMilliseconds(-tokens_ / qps_);
    }
  }
  // Sleep outside the lock so that others can reserve the tokens after ours.
  if (wait.count() > 0) {
    clock_.Sleep(wait);
  }
}

std::chrono::milliseconds RateLimiter::Delay() const {
  if (qps_ <= 0) {
    return std::chrono::milliseconds(0);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const double tokens = Refill(clock_.Now());
  return tokens >= 1 ? std::chrono::milliseconds(0) : ToMilliseconds((1 - tokens) / qps_);
}

}  // namespace certctl::kube
