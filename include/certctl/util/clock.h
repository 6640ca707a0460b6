#pragma once

#include <chrono>
#include <thread>

namespace certctl {

using TimePoint = std::chrono::system_clock::time_point;
// For intervals that must not jump when the wall clock does (lease expiry, backoff).
using MonotonicTime = std::chrono::steady_clock::time_point;

// Time is a dependency: logic takes a Clock (or a TimePoint) and never reads the system
// time or sleeps by itself, so tests can stand anywhere in a certificate's life and run
// retry and rate-limit loops without waiting.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
  virtual MonotonicTime Monotonic() const = 0;
  virtual void Sleep(std::chrono::milliseconds duration) const = 0;
};

class SystemClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::system_clock::now(); }
  MonotonicTime Monotonic() const override { return std::chrono::steady_clock::now(); }
  void Sleep(std::chrono::milliseconds duration) const override {
    std::this_thread::sleep_for(duration);
  }
};

// `time + delta`, clamped to the time point's range instead of overflowing: a deadline or a
// notAfter computed from a user's duration must never wrap into the past.
template <typename Clock, typename Duration, typename Rep, typename Period>
std::chrono::time_point<Clock, Duration> SaturatingAdd(
    std::chrono::time_point<Clock, Duration> time, std::chrono::duration<Rep, Period> delta) {
  using Point = std::chrono::time_point<Clock, Duration>;
  using Delta = std::chrono::duration<Rep, Period>;
  // Range checks happen in delta's unit: converting the limits down never overflows, while
  // converting a huge delta up to nanoseconds would.
  if (delta > std::chrono::floor<Delta>(Duration::max())) {
    return Point::max();
  }
  if (delta < std::chrono::ceil<Delta>(Duration::min())) {
    return Point::min();
  }
  const auto step = std::chrono::duration_cast<Duration>(delta).count();
  typename Duration::rep sum{};
  if (__builtin_add_overflow(time.time_since_epoch().count(), step, &sum)) {
    return step > 0 ? Point::max() : Point::min();
  }
  return Point(Duration(sum));
}

}  // namespace certctl
