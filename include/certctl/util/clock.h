#pragma once

#include <chrono>
#include <thread>

namespace certctl {

using TimePoint = std::chrono::system_clock::time_point;

// Time is a dependency: logic takes a Clock (or a TimePoint) and never reads the system
// time or sleeps by itself, so tests can stand anywhere in a certificate's life and run
// retry and rate-limit loops without waiting.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
  virtual void Sleep(std::chrono::milliseconds duration) const = 0;
};

class SystemClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::system_clock::now(); }
  void Sleep(std::chrono::milliseconds duration) const override {
    std::this_thread::sleep_for(duration);
  }
};

}  // namespace certctl
