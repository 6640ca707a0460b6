#pragma once

#include <chrono>
#include <mutex>

#include "certctl/util/clock.h"

namespace certctl::kube {

// A token bucket like client-go's: `burst` requests at once, then one every 1/qps seconds.
// Waiting goes through the Clock, so tests with a FakeClock run at once. Thread-safe.
class RateLimiter {
 public:
  // qps <= 0 turns limiting off; burst < 1 counts as 1.
  RateLimiter(double qps, int burst, const Clock& clock);

  // Takes one token, sleeping until it is available. Concurrent callers queue up: each one
  // reserves the next token and sleeps until its time.
  void Acquire();

  // How long Acquire would wait now, without taking anything.
  std::chrono::milliseconds Delay() const;

 private:
  double Refill(TimePoint now) const;

  const double qps_;
  const double burst_;
  const Clock& clock_;
  mutable std::mutex mutex_;
  double tokens_;  // may go negative: tokens promised to callers already sleeping
  TimePoint last_;
};

}  // namespace certctl::kube
