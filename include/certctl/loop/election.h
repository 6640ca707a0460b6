// Leader election for a long-running command (the sidecar, the cluster controller): the Lease
// tried and renewed on a thread of its own, the leader gauge and the log kept, the owner told
// each time this replica starts or stops leading.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "certctl/kube/client.h"
#include "certctl/leader/elector.h"
#include "certctl/loop/log.h"
#include "certctl/metrics/registry.h"
#include "certctl/util/clock.h"

namespace certctl::loop {

class Election {
 public:
  struct Telling {
    LogSink log;
    metrics::Family* leader = nullptr;  // 1 while leading
    // A failed attempt, keyed for the owner's rate limit.
    std::function<void(const std::string& key, const std::string& message)> warn;
    // On the attempt's thread, once the change is visible through Leading().
    std::function<void(bool leading)> changed;
  };

  // Without `config` this replica always leads and nothing is tried.
  Election(kube::Client& client, const Clock& clock, std::optional<leader::ElectionConfig> config,
           Telling telling);

  bool Enabled() const { return elector_.has_value(); }
  bool Leading() const { return leading_; }
  // One attempt on the caller's thread: the owner makes the first before its first pass, so
  // that a replica that can lead at once does not start as a follower and read for nothing.
  void Attempt();
  // Attempts when due until `sleep_unless_stopped` says the owner stopped, then releases the
  // Lease (a successor takes over at once instead of after the lease duration).
  void Loop(const std::function<bool(std::chrono::milliseconds)>& sleep_unless_stopped);

 private:
  std::optional<leader::Elector> elector_;
  std::optional<leader::ElectionConfig> config_;
  Telling telling_;
  std::atomic<bool> leading_{false};
};

}  // namespace certctl::loop
