#include "certctl/fleet/work_queue.h"

#include <algorithm>

namespace certctl::fleet {

WorkQueue::WorkQueue(const Clock& clock, RetryBackoff backoff) : clock_(clock), backoff_(backoff) {}

void WorkQueue::EnqueueLocked(const std::string& key) {
  if (processing_.contains(key)) {
    dirty_.insert(key);
    return;
  }
  if (queued_.insert(key).second) {
    ready_.push_back(key);
  }
}

void WorkQueue::Add(const std::string& key) {
  {
    const std::lock_guard lock(mutex_);
    if (shut_down_) {
      return;
    }
    if (auto waiting = due_at_.find(key); waiting != due_at_.end()) {
      by_due_.erase({waiting->second, key});
      due_at_.erase(waiting);
    }
    EnqueueLocked(key);
  }
  changed_.notify_one();
}

void WorkQueue::AddAfter(const std::string& key, std::chrono::milliseconds delay) {
  if (delay <= std::chrono::milliseconds(0)) {
    Add(key);
    return;
  }
  {
    const std::lock_guard lock(mutex_);
    if (shut_down_ || queued_.contains(key)) {
      return;  // already due now
    }
    const MonotonicTime due = clock_.Monotonic() + delay;
    auto [waiting, added] = due_at_.emplace(key, due);
    if (!added) {
      if (waiting->second <= due) {
        return;
      }
      by_due_.erase({waiting->second, key});
      waiting->second = due;
    }
    by_due_.emplace(due, key);
  }
  changed_.notify_one();
}

std::chrono::milliseconds WorkQueue::Retry(const std::string& key) {
  std::chrono::milliseconds delay;
  {
    const std::lock_guard lock(mutex_);
    const int failures = failures_[key]++;
    delay = backoff_.first;
    for (int i = 0; i < failures && delay < backoff_.max; ++i) {
      delay *= 2;
    }
    delay = std::min(delay, backoff_.max);
  }
  AddAfter(key, delay);
  return delay;
}

void WorkQueue::Forget(const std::string& key) {
  const std::lock_guard lock(mutex_);
  failures_.erase(key);
}

void WorkQueue::PromoteDueLocked(MonotonicTime now) {
  while (!by_due_.empty() && by_due_.begin()->first <= now) {
    const std::string key = by_due_.begin()->second;
    by_due_.erase(by_due_.begin());
    due_at_.erase(key);
    EnqueueLocked(key);
  }
}

std::optional<std::string> WorkQueue::PopLocked() {
  if (ready_.empty()) {
    return std::nullopt;
  }
  std::string key = std::move(ready_.front());
  ready_.pop_front();
  queued_.erase(key);
  processing_.insert(key);
  return key;
}

std::optional<std::string> WorkQueue::TryGet() {
  const std::lock_guard lock(mutex_);
  if (shut_down_) {
    return std::nullopt;
  }
  PromoteDueLocked(clock_.Monotonic());
  return PopLocked();
}

std::optional<std::string> WorkQueue::Get() {
  std::unique_lock lock(mutex_);
  while (!shut_down_) {
    PromoteDueLocked(clock_.Monotonic());
    if (auto key = PopLocked(); key) {
      return key;
    }
    if (by_due_.empty()) {
      changed_.wait(lock);
    } else {
      changed_.wait_for(lock, std::chrono::ceil<std::chrono::milliseconds>(by_due_.begin()->first -
                                                                           clock_.Monotonic()));
    }
  }
  return std::nullopt;
}

void WorkQueue::Done(const std::string& key) {
  {
    const std::lock_guard lock(mutex_);
    processing_.erase(key);
    if (dirty_.erase(key) > 0 && !shut_down_) {
      EnqueueLocked(key);
    } else {
      return;
    }
  }
  changed_.notify_one();
}

void WorkQueue::ShutDown() {
  {
    const std::lock_guard lock(mutex_);
    shut_down_ = true;
  }
  changed_.notify_all();
}

std::size_t WorkQueue::Ready() const {
  const std::lock_guard lock(mutex_);
  return ready_.size();
}

std::size_t WorkQueue::Waiting() const {
  const std::lock_guard lock(mutex_);
  return by_due_.size();
}

}  // namespace certctl::fleet
