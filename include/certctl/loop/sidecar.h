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
#include "certctl/loop/damping.h"
#include "certctl/loop/election.h"
#include "certctl/loop/event_series.h"
#include "certctl/loop/events.h"
#include "certctl/loop/fights.h"
#include "certctl/loop/log.h"
#include "certctl/loop/pass.h"
#include "certctl/loop/trigger.h"
#include "certctl/metrics/registry.h"
#include "certctl/util/clock.h"
#include "certctl/util/host_port.h"

namespace certctl::loop {

// The readiness check `serving`: a verified TLS handshake with the webhook's own listener,
// trusting only the caBundles the targets hold, as the API server will.
struct ServingCheck {
  HostPort address;                         // "127.0.0.1:9443"
  std::string server_name;                  // "<service>.<namespace>.svc"
  std::chrono::milliseconds timeout{2000};  // each handshake
};

// One named part of readiness, as /readyz?verbose lists it.
struct ReadinessCheck {
  std::string name;  // "certificate", "injected", "callable", "serving"
  bool ok = false;
  std::string reason;    // why not, when not ok
  bool unknown = false;  // not judged since the last pass that could (never while ok)
};

struct SidecarConfig {
  PassConfig pass;
  std::chrono::seconds resync{3600};               // a pass at least this often (jittered)
  std::optional<leader::ElectionConfig> election;  // none: this replica always writes
  std::filesystem::path ready_file;                // created while ready; empty: none
  std::chrono::seconds watch_timeout{300};         // each watch request (timeoutSeconds)
  std::string instance = "certctl";                // this replica, as Events name their reporter
  std::optional<ServingCheck> serving;             // none: readiness is the certificate alone
  // --failure-policy-once-ready Fail: the leader sets failurePolicy Fail on the targets'
  // entries with Ignore whenever a pass finds it ready by every check.
  bool fail_closed_once_ready = false;
};

// The series `run` exposes on /metrics.
struct SidecarMetrics {
  explicit SidecarMetrics(metrics::Registry& registry);

  metrics::Family& expiration;          // {secret, role="ca"|"leaf"}: notAfter, unix seconds
  metrics::Family& not_before;          // {secret, role}: notBefore, unix seconds
  metrics::Family& reconciles;          // {result="ready"|"not_ready"|"error"}
  metrics::Family& reconcile_duration;  // {result}
  metrics::Family& writes;              // {kind}
  metrics::Family& ready;
  metrics::Family& leader;
  metrics::Family& last_success;    // unix seconds of the last pass that ended ready
  metrics::Family& api_requests;    // {method, code}: "error" when no response came
  metrics::Family& rotation_phase;  // {secret}: 0 none, 1 trusting, 2 overlapping
  metrics::Family& rotations;       // {kind="ca"|"leaf"}: rotations this replica started
  // {code}: target entries the API server could not call (target-name-not-covered, ...).
  metrics::Family& call_findings;
  // {object="kind/name", field}: repairs of a field another writer changed after this replica
  // wrote it (a caBundle, a failurePolicy, a key of the Secret).
  metrics::Family& overwrites;
  // {target="kind/name"}: 1 while a webhook configuration carries the failurePolicy hold.
  metrics::Family& failure_policy_held;
  // {secret}: 1 while another certctl instance manages the Secret under other settings.
  metrics::Family& conflicting_configuration;
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

  // Readiness: nothing when every check not `excluded` holds, else why not (the first
  // failing check's reason). Thread-safe and never blocks on a pass or a handshake.
  //  - certificate: the Secret holds a pair that serves (due for renewal still does), and
  //    the folder serves it (or, unwritable, a set the Secret's CA bundle still trusts);
  //  - injected: every target's caBundle holds the Secret's CA bundle (with certificate,
  //    what the ready file waits for);
  //  - callable: the certificate names what every target entry calls (SPEC 4a);
  //  - serving (with SidecarConfig::serving): the webhook's listener verifies against the
  //    targets' caBundles.
  std::optional<std::string> NotReady(const std::set<std::string>& excluded = {}) const;
  // Every check, in the order above.
  std::vector<ReadinessCheck> Readiness() const;
  // With --failure-policy-once-ready: the webhook configurations whose failurePolicy certctl
  // leaves alone, as the leader last read them ("validatingwebhookconfiguration/x").
  std::vector<std::string> FailurePolicyHolds() const;
  // Another certctl instance with other settings on the Secret, as the leader's last pass
  // found it: one line (ConfigurationConflict::Describe), or nothing.
  std::optional<std::string> Conflict() const;
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
  // One pass and what follows from it; true when the folder got a new set.
  bool RunPass(const std::set<std::string>& reasons);
  // Logs and counts what a pass wrote, and warns of rotation annotations it ignored or
  // clamped: once per distinct value, not once per pass (a follower meets it every pass).
  void TellWrites(const PassReport& report);
  // An Event for every write the pass made, so `kubectl describe` tells what certctl did.
  void RecordWrites(const PassReport& report);
  // The holds on failurePolicy among the targets a leader pass read: kept for /readyz,
  // exported, and logged when one is put on or taken off.
  void NoteFailurePolicyHolds(const std::vector<controller::TargetObject>& targets);
  // A configuration conflict a leader pass found (or none): kept for /readyz?verbose,
  // exported, logged and told in a Warning Event when it starts or changes.
  void NoteConflict(const std::optional<controller::ConfigurationConflict>& conflict,
                    const std::string& secret_uid);
  // Repeats the serving handshake: soon after each pass, then every few seconds.
  void ServingLoop();
  // The `certificate` and `injected` checks from a pass (or a failed one: not ready, and
  // injected left as SetTargetChecksUnknown or the last pass put it).
  void SetCertificateReadiness(bool ready, const std::string& reason,
                               std::vector<std::string> target_bundles,
                               std::optional<std::pair<bool, std::string>> injected);
  void SetServingReadiness(bool ready, const std::string& reason);
  // `injected` and `callable` not judged (a pass failed before reading the targets): shown
  // as unknown until a pass judges them again.
  void SetTargetChecksUnknown(const std::string& reason);
  // The `callable` check from a pass's call findings, with their metric; the leader records
  // a Warning Event for each finding it has not told since the findings last cleared.
  void SetCallableReadiness(const std::vector<Finding>& findings, Role role);
  // --failure-policy-once-ready: Fail on every entry of `targets` with Ignore that the API
  // server can call, told like the other writes. Only the leader, only when ready by every
  // check.
  struct Closing {
    bool held_back = false;  // a configuration set back to Ignore waits for the damper
    // Why entries keep Ignore (their Service, port or endpoint is missing); empty: none do.
    std::string kept_because;
  };
  Closing FailClosed(const std::vector<controller::TargetObject>& targets);
  // When entries kept at Ignore for `kept_because` (empty: none) are judged again.
  std::optional<MonotonicTime> KeptIgnoreRecheck(const std::string& kept_because);
  // The folded Events due, on the leader; a follower forgets its series.
  void RecordDueFoldedEvents();
  // Creates or removes the ready file when `certificate` and `injected` together changed
  // from `file_was`. Needs state_mutex_.
  void FollowReadyFileLocked(bool file_was);
  // After either check changed: the ready gauge and the log line. Needs state_mutex_.
  void PublishReadiness(bool was_ready);
  bool ReadyLocked() const;
  // Sleeps up to `duration`; true when stopped meanwhile.
  bool SleepUnlessStopped(std::chrono::milliseconds duration);
  std::chrono::milliseconds Jittered(std::chrono::milliseconds base, double spread);
  // Removes the sets of the certificate folder that were replaced; a folder named like one
  // that certctl did not write is left, and told once in a warning.
  void RemoveStaleSets();
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

  Election election_;

  mutable std::mutex state_mutex_;
  ReadinessCheck certificate_{"certificate", false, "starting"};
  ReadinessCheck injected_{"injected", false, "waiting for the first pass"};
  ReadinessCheck callable_{"callable", false, "waiting for the targets to be read"};
  std::set<std::string> warned_calls_;       // call findings told in a Warning Event (loop thread)
  std::set<std::string> warned_rotation_;    // "annotation=value" warned of (loop thread)
  std::optional<ReadinessCheck> serving_;    // with SidecarConfig::serving
  bool serving_passed_ = false;              // the serving check held at least once
  std::vector<std::string> target_bundles_;  // of the last ready pass, for the handshake
  std::vector<std::string> failure_policy_held_;  // FailurePolicyHolds()
  std::optional<std::string> conflict_;           // Conflict()
  std::optional<TimePoint> valid_until_;          // notAfter of the leaf (or CA) last judged
  std::optional<TimePoint> next_step_at_;         // a CA rotation's next step (loop thread only)
  BundleHold bundle_hold_;                        // for the wait before step 2 (loop thread only)
  bool folder_stale_ = false;                     // the last pass could not write the folder (loop)
  std::set<std::string> told_foreign_sets_;       // lookalike set folders warned of (loop thread)
  bool serving_probe_due_ = false;                // a pass ended: handshake again now (stop_mutex_)
  // Watches currently failing: while any is, the loop polls, since no event would tell it
  // that someone wiped a caBundle meanwhile.
  std::atomic<int> failing_watches_{0};
  // Webhooks outside the targets warned of once each (OtherCaller::Describe; loop thread).
  std::set<std::string> warned_other_callers_;
  std::map<std::string, std::pair<std::string, MonotonicTime>> last_warning_;
  std::atomic<std::int64_t> heartbeat_{0};  // monotonic milliseconds of the last loop turn

  // Events (every one) folded into one per interval, and objects another writer keeps
  // changing, whose repairs are spaced out. Loop thread only.
  EventRecorder events_;
  Fights fights_;
  std::optional<MonotonicTime> repair_due_at_;  // when a held-back repair may go

  std::mt19937_64 random_{std::random_device{}()};
  std::chrono::milliseconds backoff_{0};
  // The wait before entries kept at Ignore are judged again, and why they were kept; it
  // starts again at its shortest when the reason changes.
  std::chrono::milliseconds kept_recheck_{0};
  std::optional<MonotonicTime> kept_recheck_at_;
  std::string kept_because_;
  std::vector<std::thread> threads_;
};

}  // namespace certctl::loop
