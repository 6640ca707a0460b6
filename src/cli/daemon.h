// What the long-running commands (`run`, `controller`) share of their process: the Lease
// flags, the signals (SIGTERM/SIGINT stop, SIGHUP reconciles now) and the endpoints' limits.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "certctl/endpoints/server.h"
#include "certctl/leader/elector.h"
#include "certctl/loop/log.h"
#include "certctl/metrics/registry.h"
#include "certctl/util/result.h"

namespace certctl::cli {

// A usage error of `command`: the message on stderr, exit 2.
int UsageError(const std::string& command, const std::string& message);

// The loop's log lines, through spdlog.
void LogToSpdlog(loop::LogLevel level, const std::string& message);

// After SIGTERM the process ends within this even if a request is still in flight.
inline constexpr std::chrono::milliseconds kShutdownGrace{4500};

struct LeaseFlags {
  bool leader_elect = false;
  std::string lease_name;  // empty: the command's default
  // client-go's defaults; shorter times hand over sooner and cost more API requests.
  std::chrono::seconds lease_duration = leader::ElectionConfig{}.lease_duration;
  std::chrono::seconds lease_renew_deadline = leader::ElectionConfig{}.renew_deadline;
  std::chrono::seconds lease_retry_period = leader::ElectionConfig{}.retry_period;
  std::string identity;  // empty: $POD_NAME or the hostname, plus "_" and a random suffix
};
// --leader-elect (`leader_elect_help` says what it does for the command), --lease-name
// (`default_name` in its help), the three times and --identity.
void AddLeaseFlags(CLI::App& command, LeaseFlags& flags, const std::string& leader_elect_help,
                   const std::string& default_name);
// As client-go orders them: a leader stops writing before anyone may take its lease, and
// renews often enough that one late attempt does not cost it the lead.
Status CheckLeaseTimes(const LeaseFlags& flags);

void AddMetricsRoute(endpoints::Routes& routes, const metrics::Registry& registry);

// --health-addr (/healthz, /readyz) and --metrics-addr (/metrics; empty: none).
struct EndpointFlags {
  std::string health_addr = ":8081";
  std::string metrics_addr = ":8080";
};
void AddEndpointFlags(CLI::App& command, EndpointFlags& flags);

struct EndpointServers {
  std::unique_ptr<endpoints::Server> health;
  std::unique_ptr<endpoints::Server> metrics;  // none when shared with health, or disabled
  // "health on port N, metrics on port M", for the first log line.
  std::string Ports() const;
};
// Binds both, one server when both addresses are the same; kInvalidArgument naming the flag
// of an address that does not parse or cannot be bound (a usage error).
Result<EndpointServers> StartEndpoints(const EndpointFlags& flags, endpoints::Routes health_routes,
                                       const metrics::Registry& registry);
// Checks both addresses before anything else starts: the same errors as StartEndpoints.
Status CheckEndpointFlags(const EndpointFlags& flags);

// Blocks SIGTERM, SIGINT and SIGHUP in this thread and every thread started after it, so
// they are only ever taken by SignalThread's sigwait: first thing, before any thread starts.
void BlockControlSignals();

// Waits for SIGTERM/SIGINT (`stop`) and SIGHUP (`reconcile`) on a thread of its own. After
// a stop the process gets kShutdownGrace to finish, then exits 0 at once.
class SignalThread {
 public:
  SignalThread(std::function<void()> stop, std::function<void()> reconcile);
  SignalThread(const SignalThread&) = delete;
  SignalThread& operator=(const SignalThread&) = delete;
  // Called once the command's loop returned: lets the thread end.
  ~SignalThread();

 private:
  void Loop();

  std::function<void()> stop_;
  std::function<void()> reconcile_;
  const sigset_t signals_;
  std::mutex mutex_;
  std::condition_variable finished_changed_;
  bool finished_ = false;
  std::atomic<bool> stop_requested_{false};
  std::thread thread_;  // last: it starts in the constructor and uses everything above
};

// The endpoint servers keep probes answered by closing the oldest connections at their caps;
// a soft descriptor limit below the hard one (often 1024) would make those caps the
// process's limit instead. Raising the soft limit needs no privilege.
void RaiseOpenFileLimit();

}  // namespace certctl::cli
