#pragma once

#include <chrono>

#include "certctl/util/clock.h"

namespace certctl::testing {

// A clock that stands still until a test moves it.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(TimePoint start = TimePoint(std::chrono::seconds(1800000000))) : now_(start) {}

  TimePoint Now() const override { return now_; }
  void Set(TimePoint now) { now_ = now; }
  void Advance(std::chrono::seconds by) { now_ += by; }

 private:
  TimePoint now_;
};

}  // namespace certctl::testing
