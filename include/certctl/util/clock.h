#pragma once

#include <chrono>

namespace certctl {

using TimePoint = std::chrono::system_clock::time_point;

// Wall-clock time is a dependency: logic takes a Clock (or a TimePoint) and never
// reads the system time itself, so tests can stand anywhere in a certificate's life.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
};

class SystemClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::system_clock::now(); }
};

}  // namespace certctl
