#pragma once

#include <chrono>
#include <vector>

#include "certctl/util/clock.h"

namespace certctl::testing {

// A clock that stands still until a test moves it; Sleep moves it and remembers how long.
// Sleep and Advance move the wall and the monotonic clock together; Set moves only the wall
// clock, the way an NTP step or a resumed VM does.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(TimePoint start = TimePoint(std::chrono::seconds(1800000000))) : now_(start) {}

  TimePoint Now() const override { return now_; }
  MonotonicTime Monotonic() const override { return monotonic_; }
  void Sleep(std::chrono::milliseconds duration) const override {
    sleeps_.push_back(duration);
    now_ += duration;
    monotonic_ += duration;
  }

  void Set(TimePoint now) { now_ = now; }
  void Advance(std::chrono::milliseconds by) {
    now_ += by;
    monotonic_ += by;
  }
  const std::vector<std::chrono::milliseconds>& sleeps() const { return sleeps_; }

 private:
  mutable TimePoint now_;
  mutable MonotonicTime monotonic_{std::chrono::hours(1)};
  mutable std::vector<std::chrono::milliseconds> sleeps_;
};

}  // namespace certctl::testing
