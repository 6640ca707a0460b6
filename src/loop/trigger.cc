#include "certctl/loop/trigger.h"

namespace certctl::loop {

void Trigger::Request(const std::string& reason) {
  {
    const std::lock_guard lock(mutex_);
    reasons_.insert(reason);
  }
  changed_.notify_all();
}

std::optional<std::set<std::string>> Trigger::Wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [this] { return stopped_ || !reasons_.empty(); });
  if (stopped_ || reasons_.empty()) {
    return std::nullopt;
  }
  std::set<std::string> reasons;
  reasons.swap(reasons_);
  return reasons;
}

void Trigger::Stop() {
  {
    const std::lock_guard lock(mutex_);
    stopped_ = true;
  }
  changed_.notify_all();
}

bool Trigger::stopped() const {
  const std::lock_guard lock(mutex_);
  return stopped_;
}

}  // namespace certctl::loop
