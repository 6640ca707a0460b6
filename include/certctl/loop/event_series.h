#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "certctl/kube/client.h"
#include "certctl/util/clock.h"

namespace certctl::loop {

// One Event object per series: repeats of an Event (the same type and reason about the same
// object) update the count, message and lastTimestamp of the Event recorded first, the way
// Kubernetes' own components count theirs, so a storm of writes is one Event whose count
// rises, never one per write. The first repeat updates it at once; later ones are held and
// written together once `interval` has passed since the last write. A series quiet for
// `forget` ends; the next Event of its kind starts a new one. Not thread-safe: the loop's.
class EventSeries {
 public:
  explicit EventSeries(std::chrono::milliseconds interval = std::chrono::minutes(1),
                       std::chrono::milliseconds forget = std::chrono::minutes(10))
      : interval_(interval), forget_(forget) {}

  // What to write: a new Event, or a merge patch of the series' Event.
  struct Write {
    std::string key;             // the series, for Recreated
    std::string ns;              // the Event's namespace
    std::string name;            // empty: create `event`; else patch that Event with `patch`
    kube::Json event;            // the whole Event as it should stand now
    kube::Json patch = nullptr;  // {"count", "message", "lastTimestamp"}
  };

  // `event` (from MakeEvent) happened at `now`: what to write now (nullopt: held, to come out
  // of Due()).
  std::optional<Write> Admit(kube::Json event, MonotonicTime now);
  // The held repeats whose interval ended by `now`, one patch per series.
  std::vector<Write> Due(MonotonicTime now);
  // When Due() next has something (nullopt: nothing is held).
  std::optional<MonotonicTime> NextDue() const;
  // The series' Event was gone when patched (deleted, or expired by the API server's TTL)
  // and was created again as `name`.
  void Recreated(const std::string& key, const std::string& name);
  // Forgets every series (the replica stopped leading: the new leader tells its own).
  void Clear() { series_.clear(); }

 private:
  struct Series {
    MonotonicTime written;  // the last write of the series' Event
    MonotonicTime seen;     // the last Event of the series
    std::string event;      // as it stands in the API server, or will once held is written
                            // (compact JSON)
    bool held = false;      // event has repeats not written yet
  };
  // `event` is series.event parsed.
  static Write PatchOf(const std::string& key, Series& series, kube::Json event, MonotonicTime now);

  std::chrono::milliseconds interval_;
  std::chrono::milliseconds forget_;
  std::map<std::string, Series> series_;
};

}  // namespace certctl::loop
