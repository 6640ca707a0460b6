// The keys the controller has to reconcile, with client-go's workqueue rules: a key is queued
// at most once, never handed to two workers at once (added again while one works on it, it
// is queued again when that worker is done), and a key that failed waits a back-off that
// doubles with each failure in a row, per key, so one broken object does not slow the rest.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "certctl/util/clock.h"

namespace certctl::fleet {

struct RetryBackoff {
  std::chrono::milliseconds first{500};
  std::chrono::milliseconds max{std::chrono::minutes(5)};
};

class WorkQueue {
 public:
  explicit WorkQueue(const Clock& clock, RetryBackoff backoff = {});

  // Due now.
  void Add(const std::string& key);
  // Due after `delay`; a key already due sooner keeps the sooner time.
  void AddAfter(const std::string& key, std::chrono::milliseconds delay);
  // After a failure: due after the key's back-off, which doubles with each failure in a row.
  // Returns the delay.
  std::chrono::milliseconds Retry(const std::string& key);
  // After a success: the key's back-off starts over.
  void Forget(const std::string& key);

  // A key due now, handed to the caller until Done; nothing when none is due.
  std::optional<std::string> TryGet();
  // Blocks until a key is due (nothing once ShutDown).
  std::optional<std::string> Get();
  void Done(const std::string& key);
  // Wakes every Get; they return nothing from then on.
  void ShutDown();

  // Keys due now and not being worked on, for a metric.
  std::size_t Ready() const;
  // Keys waiting for a later time.
  std::size_t Waiting() const;

 private:
  // Moves the keys due by now to ready_. Needs mutex_.
  void PromoteDueLocked(MonotonicTime now);
  void EnqueueLocked(const std::string& key);
  std::optional<std::string> PopLocked();

  const Clock& clock_;
  const RetryBackoff backoff_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool shut_down_ = false;
  std::deque<std::string> ready_;
  std::set<std::string> queued_;                 // in ready_
  std::set<std::string> processing_;             // handed out, not Done
  std::set<std::string> dirty_;                  // added while processing: queued again at Done
  std::map<std::string, MonotonicTime> due_at_;  // waiting keys
  std::set<std::pair<MonotonicTime, std::string>> by_due_;
  std::map<std::string, int> failures_;
};

}  // namespace certctl::fleet
