#pragma once

#include <chrono>
#include <optional>
#include <random>
#include <string>

#include "certctl/kube/client.h"
#include "certctl/util/clock.h"
#include "certctl/util/result.h"

namespace certctl::leader {

// A candidate waits retry_period plus up to this many times as much again between attempts
// (client-go's JitterFactor); renew_deadline must be longer than that factor of retry_period.
inline constexpr double kCandidateJitter = 1.2;

struct ElectionConfig {
  std::string ns;                           // the Lease's namespace (the Secret's)
  std::string name;                         // the Lease's name
  std::string identity;                     // this replica: unique among the candidates
  std::chrono::seconds lease_duration{15};  // how long a silent holder keeps the lease
  std::chrono::seconds renew_deadline{10};  // a holder that cannot renew this long steps down
  std::chrono::seconds retry_period{2};     // between attempts
};

// Kubernetes' `coordination.k8s.io/v1` Lease election, as client-go's leaderelection
// package runs it, so certctl replicas and client-go tooling read one another's leases:
//  - a candidate takes a lease that is absent, has no holder, or whose record has not
//    changed for the record's leaseDurationSeconds, judged on this process's monotonic clock
//    from when it first saw that record (never by comparing renewTime with the wall clock,
//    so clock skew between nodes cannot make two leaders);
//  - the holder renews every retry_period and steps down when it has not renewed for
//    renew_deadline (which is shorter than lease_duration, so it stops before anyone may
//    take over);
//  - every write is a create or a PUT carrying the resourceVersion read, so of two
//    candidates racing for a lease exactly one wins;
//  - Release empties holderIdentity (leaseDurationSeconds 1), so a successor takes over
//    at once instead of after lease_duration.
// Times are MicroTime: RFC 3339 with six fractional digits. Not thread-safe: one loop
// drives it.
class Elector {
 public:
  Elector(kube::Client& client, const Clock& clock, ElectionConfig config);

  // One attempt to acquire or renew. Returns whether this replica leads afterwards; an API
  // failure is an error (and, past renew_deadline since the last renewal, also loses the
  // lead: IsLeader turns false).
  Result<bool> TryAcquireOrRenew();

  // Whether this replica leads now: it holds the lease and renewed it within renew_deadline.
  bool IsLeader() const;

  // How long to wait before the next TryAcquireOrRenew: retry_period for the leader; for a
  // candidate retry_period plus up to 1.2 times as much again (client-go's jitter), so
  // candidates do not knock in step.
  std::chrono::milliseconds NextAttemptIn();

  // Gives the lease up if this replica holds it. Safe to call at any time.
  Status Release();

  // The holder last seen (empty: none), for logs and metrics.
  const std::string& observed_holder() const { return observed_holder_; }
  const ElectionConfig& config() const { return config_; }

 private:
  Result<bool> TryAcquireOrRenewOnce();
  void Observe(const kube::Json& lease, const std::string& holder);

  kube::Client& client_;
  const Clock& clock_;
  const ElectionConfig config_;
  std::string what_;  // "lease/ns/name" for messages

  // The lease as last seen, and when (monotonic) its record last changed.
  std::optional<kube::Json> observed_;
  std::string observed_record_;  // holder, renewTime, acquireTime, transitions, duration
  std::string observed_holder_;
  MonotonicTime observed_time_{};
  bool holding_ = false;
  MonotonicTime last_renewal_{};
  std::mt19937_64 jitter_{std::random_device{}()};
};

// "2026-01-31T12:00:00.123456Z": the Kubernetes MicroTime form.
std::string FormatMicroTime(TimePoint time);

}  // namespace certctl::leader
