#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "certctl/kube/client.h"
#include "certctl/util/clock.h"

namespace certctl::loop {

// Folds repeats of an Event (the same type and reason about the same object) into one Event
// per interval with a count, so that a storm of writes is told as a few Events, never one
// per write. The first of a series is recorded at once; repeats within the interval are held
// and recorded together once it ends, as one Event whose count says how many they were and
// whose message is the latest. Not thread-safe: the loop's.
class EventSeries {
 public:
  explicit EventSeries(std::chrono::milliseconds interval = std::chrono::minutes(1))
      : interval_(interval) {}

  // `event` (from MakeEvent) happened at `now`: returns it when it is to be recorded now;
  // nullopt when it is held, to come out of Due().
  std::optional<kube::Json> Admit(kube::Json event, MonotonicTime now);
  // The held repeats whose interval ended by `now`, one Event per series.
  std::vector<kube::Json> Due(MonotonicTime now);
  // When Due() next has something (nullopt: nothing is held).
  std::optional<MonotonicTime> NextDue() const;
  // Forgets everything held (the replica stopped leading: the new leader tells its own).
  void Clear() { series_.clear(); }

 private:
  struct Series {
    MonotonicTime recorded;  // when an Event of the series was last recorded
    std::optional<kube::Json> held;
  };

  std::chrono::milliseconds interval_;
  std::map<std::string, Series> series_;
};

}  // namespace certctl::loop
