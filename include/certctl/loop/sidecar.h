#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "certctl/kube/client.h"
#include "certctl/leader/elector.h"
#include "certctl/loop/pass.h"
#include "certctl/loop/trigger.h"
#include "certctl/metrics/registry.h"
#include "certctl/util/clock.h"

namespace certctl::loop {

enum class LogLevel { kDebug, kInfo, kWarning };
using LogSink = std::function<void(LogLevel level, const std::string& message)>;

struct SidecarConfig {
  PassConfig pass;
  std::chrono::seconds resync{3600};               // a pass at least this often (jittered)
  std::optional<leader::ElectionConfig> election;  // none: this replica always writes
  std::filesystem::path ready_file;                // created while ready; empty: none
  std::chrono::seconds watch_timeout{300};         // each watch request (timeoutSeconds)
  std::string instance = "certctl";                // this replica, as Events name their reporter
};

// The series `run` exposes on /metrics.
struct SidecarMetrics {
  explicit SidecarMetrics(metrics::Registry& registry);

  metrics::Family& expiration;          // {secret, role="ca"|"leaf"}: notAfter, unix seconds
  metrics::Family& reconciles;          // {result="ready"|"not_ready"|"error"}
  metrics::Family& reconcile_duration;  // {result}
  metrics::Family& writes;              // {kind}
  metrics::Family& ready;
  metrics::Family& leader;
  metrics::Family& last_success;  // unix seconds of the last pass that ended ready
  metrics::Family& api_requests;  // {method, code}: "error" when no response came
};

// The sidecar controller: watches the Secret and every target, runs one reconcile pass at
// a time whenever something changed (and at least every `resync`, judged on the wall clock
// so a resumed VM or a clock step still renews in time), keeps readiness for /readyz and
// the ready file, and, with an election, writes only while it leads. API failures never end
// it: passes are retried with capped, jittered backoff; watches resume or re-list.
class Sidecar {
 public:
  Sidecar(kube::Client& client, const Clock& clock, SidecarConfig config, SidecarMetrics& metrics,
          LogSink log);
  Sidecar(const Sidecar&) = delete;
  Sidecar& operator=(const Sidecar&) = delete;
  ~Sidecar();

  // Runs until Stop. Returns after the watches ended and the lease (if held) was released.
  void Run();
  // From any thread (a signal handler thread): ends Run.
  void Stop();
  // From any thread: a pass now (SIGHUP).
  void Reconcile(const std::string& reason);

  // Readiness: nothing when ready, else why not. Thread-safe and never blocks on a pass.
  std::optional<std::string> NotReady() const;
  // Liveness: the loop went round within the last minute.
  bool Alive() const;

 private:
  struct WatchSpec {
    const kube::ResourceType* type;
    std::string ns;
    kube::ListOptions list;
    std::string what;  // "secret/infra/x", "validatingwebhookconfigurations app=hook"
  };

  std::vector<WatchSpec> Watches() const;
  void WatchLoop(const WatchSpec& spec);
  void ElectionLoop();
  void RunPass(const std::set<std::string>& reasons);
  // An Event for every write the pass made, so `kubectl describe` tells what certctl did.
  void RecordWrites(const PassReport& report);
  void SetReadiness(bool ready, const std::string& reason);
  // Sleeps up to `duration`; true when stopped meanwhile.
  bool SleepUnlessStopped(std::chrono::milliseconds duration);
  std::chrono::milliseconds Jittered(std::chrono::milliseconds base, double spread);
  // Logs `message` at warning level, but a message repeating within a minute at debug.
  void WarnRateLimited(const std::string& key, const std::string& message);

  kube::Client& client_;
  const Clock& clock_;
  const SidecarConfig config_;
  SidecarMetrics& metrics_;
  LogSink log_;
  Trigger trigger_;

  std::mutex stop_mutex_;
  std::condition_variable stop_changed_;
  std::atomic<bool> stopping_{false};

  std::optional<leader::Elector> elector_;
  std::atomic<bool> leading_{false};

  mutable std::mutex state_mutex_;
  bool ready_ = false;
  std::string not_ready_ = "starting";
  std::map<std::string, std::pair<std::string, MonotonicTime>> last_warning_;
  std::atomic<std::int64_t> heartbeat_{0};  // monotonic milliseconds of the last loop turn

  std::mt19937_64 random_{std::random_device{}()};
  std::chrono::milliseconds backoff_{0};
  std::vector<std::thread> threads_;
};

}  // namespace certctl::loop
