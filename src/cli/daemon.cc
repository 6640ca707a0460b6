#include "cli/daemon.h"

#include <iostream>

#include <spdlog/spdlog.h>

#include "certctl/util/duration.h"

#include "cli/exit_codes.h"
#include "cli/flags.h"
#include <pthread.h>
#include <sys/resource.h>

namespace certctl::cli {
namespace {

sigset_t ControlSignals() {
  sigset_t signals;
  ::sigemptyset(&signals);
  ::sigaddset(&signals, SIGTERM);
  ::sigaddset(&signals, SIGINT);
  ::sigaddset(&signals, SIGHUP);
  return signals;
}

}  // namespace

int UsageError(const std::string& command, const std::string& message) {
  std::cerr << command << ": " << message << "\n";
  return kExitUsage;
}

void LogToSpdlog(loop::LogLevel level, const std::string& message) {
  switch (level) {
    case loop::LogLevel::kDebug:
      spdlog::debug("{}", message);
      break;
    case loop::LogLevel::kInfo:
      spdlog::info("{}", message);
      break;
    case loop::LogLevel::kWarning:
      spdlog::warn("{}", message);
      break;
  }
}

void AddLeaseFlags(CLI::App& command, LeaseFlags& flags, const std::string& leader_elect_help,
                   const std::string& default_name) {
  command.add_flag("--leader-elect", flags.leader_elect, leader_elect_help);
  command
      .add_option("--lease-name", flags.lease_name,
                  "Name of the Lease (default: " + default_name + ")")
      ->check(ObjectNameCheck("Lease"));
  AddDurationFlag(command, "--lease-duration", flags.lease_duration,
                  "How long a silent holder keeps the Lease before another replica may take it");
  AddDurationFlag(command, "--lease-renew-deadline", flags.lease_renew_deadline,
                  "The leader stops writing when it could not renew the Lease for this long "
                  "(less than --lease-duration)");
  AddDurationFlag(command, "--lease-retry-period", flags.lease_retry_period,
                  "Between attempts to take or renew the Lease (--lease-renew-deadline is more "
                  "than 1.2 times this)");
  command.add_option(
      "--identity", flags.identity,
      "This replica's name in the Lease and in Events (default: $POD_NAME or the hostname, "
      "plus _ and a random suffix)");
}

Status CheckLeaseTimes(const LeaseFlags& flags) {
  if (flags.lease_renew_deadline >= flags.lease_duration) {
    return Fail(ErrorCode::kInvalidArgument, "--lease-renew-deadline (" +
                                                 FormatDuration(flags.lease_renew_deadline) +
                                                 ") must be less than --lease-duration (" +
                                                 FormatDuration(flags.lease_duration) + ")");
  }
  if (static_cast<double>(flags.lease_renew_deadline.count()) <=
      leader::kCandidateJitter * static_cast<double>(flags.lease_retry_period.count())) {
    return Fail(ErrorCode::kInvalidArgument,
                "--lease-renew-deadline (" + FormatDuration(flags.lease_renew_deadline) +
                    ") must be more than 1.2 times --lease-retry-period (" +
                    FormatDuration(flags.lease_retry_period) + ")");
  }
  return {};
}

void AddMetricsRoute(endpoints::Routes& routes, const metrics::Registry& registry) {
  routes["/metrics"] = [&registry](const endpoints::Query&) {
    return endpoints::Response{200, registry.Render(), "text/plain; version=0.0.4; charset=utf-8"};
  };
}

void AddEndpointFlags(CLI::App& command, EndpointFlags& flags) {
  command.add_option("--health-addr", flags.health_addr, "Address for /healthz and /readyz")
      ->capture_default_str();
  command
      .add_option("--metrics-addr", flags.metrics_addr,
                  "Address for /metrics (Prometheus text format); empty: disabled")
      ->capture_default_str();
}

namespace {

struct EndpointAddresses {
  endpoints::ListenAddress health;
  std::optional<endpoints::ListenAddress> metrics;
};

Result<EndpointAddresses> ParseEndpointFlags(const EndpointFlags& flags) {
  auto health = endpoints::ParseListenAddress(flags.health_addr);
  if (!health) {
    return Fail(ErrorCode::kInvalidArgument, "--health-addr: " + health.error().message());
  }
  EndpointAddresses addresses{*health, std::nullopt};
  if (!flags.metrics_addr.empty()) {
    auto metrics = endpoints::ParseListenAddress(flags.metrics_addr);
    if (!metrics) {
      return Fail(ErrorCode::kInvalidArgument, "--metrics-addr: " + metrics.error().message());
    }
    addresses.metrics = *metrics;
  }
  return addresses;
}

}  // namespace

Status CheckEndpointFlags(const EndpointFlags& flags) {
  auto parsed = ParseEndpointFlags(flags);
  return parsed ? Status() : Fail(parsed.error());
}

std::string EndpointServers::Ports() const {
  return "health on port " + std::to_string(health->port()) +
         (metrics ? ", metrics on port " + std::to_string(metrics->port()) : std::string());
}

Result<EndpointServers> StartEndpoints(const EndpointFlags& flags, endpoints::Routes health_routes,
                                       const metrics::Registry& registry) {
  auto addresses = ParseEndpointFlags(flags);
  if (!addresses) {
    return Fail(addresses.error());
  }
  const bool shared = addresses->metrics && addresses->metrics->host == addresses->health.host &&
                      addresses->metrics->port == addresses->health.port;
  if (shared) {
    AddMetricsRoute(health_routes, registry);
  }
  EndpointServers servers;
  auto health = endpoints::Server::Start(addresses->health, std::move(health_routes));
  if (!health) {
    return Fail(ErrorCode::kInvalidArgument, "--health-addr: " + health.error().message());
  }
  servers.health = std::move(*health);
  if (addresses->metrics && !shared) {
    endpoints::Routes metrics_routes;
    AddMetricsRoute(metrics_routes, registry);
    auto metrics = endpoints::Server::Start(*addresses->metrics, std::move(metrics_routes));
    if (!metrics) {
      return Fail(ErrorCode::kInvalidArgument, "--metrics-addr: " + metrics.error().message());
    }
    servers.metrics = std::move(*metrics);
  }
  return servers;
}

void BlockControlSignals() {
  const sigset_t signals = ControlSignals();
  ::pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

SignalThread::SignalThread(std::function<void()> stop, std::function<void()> reconcile)
    : stop_(std::move(stop)),
      reconcile_(std::move(reconcile)),
      signals_(ControlSignals()),
      thread_([this] { Loop(); }) {}

SignalThread::~SignalThread() {
  {
    const std::lock_guard lock(mutex_);
    finished_ = true;
  }
  finished_changed_.notify_all();
  if (!stop_requested_) {
    ::pthread_kill(thread_.native_handle(), SIGTERM);  // wakes sigwait
  }
  thread_.join();
}

void SignalThread::Loop() {
  while (true) {
    int signal = 0;
    if (::sigwait(&signals_, &signal) != 0) {
      continue;
    }
    {
      const std::lock_guard lock(mutex_);
      if (finished_) {
        return;
      }
    }
    if (signal == SIGHUP) {
      spdlog::info("SIGHUP: reconciling now");
      reconcile_();
      continue;
    }
    spdlog::info("{}: stopping", signal == SIGTERM ? "SIGTERM" : "SIGINT");
    stop_requested_ = true;
    stop_();
    std::unique_lock lock(mutex_);
    if (!finished_changed_.wait_for(lock, kShutdownGrace, [this] { return finished_; })) {
      // A request still in flight must not hold the pod past its grace period; every
      // write is whole, so ending here leaves nothing half-done.
      spdlog::warn("stopping took longer than {} ms; exiting now", kShutdownGrace.count());
      spdlog::default_logger()->flush();
      std::_Exit(kExitOk);
    }
    return;
  }
}

void RaiseOpenFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace certctl::cli
