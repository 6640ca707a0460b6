#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <string>

namespace certctl::loop {

// Why a reconcile was asked for: a watch event, the resync timer, SIGHUP, a retry.
// Requests coalesce: however many arrive while a reconcile runs, the loop runs one more,
// with every reason, so a burst of events (certctl's own writes echoed back by the watches
// among them) costs one pass, never a storm. Thread-safe: watch threads request, the loop
// waits.
class Trigger {
 public:
  // Asks for a reconcile. Cheap; never blocks on the loop.
  void Request(const std::string& reason);

  // Waits until a reconcile is requested, `timeout` passes, or Stop is called. Returns the
  // reasons gathered (sorted, each once), consuming them; nothing on timeout or stop.
  std::optional<std::set<std::string>> Wait(std::chrono::milliseconds timeout);

  // Wakes every waiter for good: Wait returns nothing from now on.
  void Stop();
  bool stopped() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::set<std::string> reasons_;
  bool stopped_ = false;
};

}  // namespace certctl::loop
