// The sidecar controller's loop: its pass, its timers and its backoff. The rooms around it
// have files of their own: watches.cc, election.cc, readiness.cc, serving.cc, recording.cc.
#include "certctl/loop/sidecar.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "certctl/certdir/cert_dir.h"
#include "certctl/controller/issuer.h"
#include "certctl/controller/secret.h"
#include "certctl/util/text.h"

#include "loop/sidecar_internal.h"

namespace certctl::loop {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The loop wakes at least this often: to notice a wall-clock jump past the resync time, and
// to show /healthz it is alive.
constexpr milliseconds kHeartbeat{5000};
constexpr milliseconds kFirstBackoff{500};
// A pass that ends not ready is tried again after this even without a watch event: a safety
// net, since the events that fix it (the target appearing, the leader writing) trigger one.
constexpr milliseconds kNotReadyRetry{30000};
// A folder that cannot take the current set: a local write, cheap to try again soon, and the
// set it still holds may be near its end.
constexpr milliseconds kStaleFolderRetry{1000};
constexpr seconds kWarningInterval{60};
constexpr milliseconds kAliveWithin{60000};
// While a watch is failing, a pass this often re-judges readiness and repairs what changed
// unseen.
constexpr milliseconds kPollWhileBlind{5000};
// An entry kept at Ignore for want of a Service, a port or a ready endpoint is judged again
// after 5 s (the webhook's pods become ready after certctl does), then twice as long each
// time it is still kept, up to 2 minutes: one that stays uncallable costs a read of its
// Service and EndpointSlices every 2 minutes, not 12 a minute.
constexpr milliseconds kKeptIgnoreFirstRecheck{5000};
constexpr milliseconds kKeptIgnoreMaxRecheck{120000};
// How long a replaced set of the certificate folder stays for readers that were opening it.
constexpr milliseconds kStaleSetGrace{2000};

// Failures that say nothing about the certificates: the API was unreachable or slow.
bool ApiUnreachable(const Error& error) {
  return error.code() == ErrorCode::kUnavailable || error.code() == ErrorCode::kDeadlineExceeded;
}

std::int64_t Millis(MonotonicTime time) {
  return std::chrono::duration_cast<milliseconds>(time.time_since_epoch()).count();
}

double UnixSeconds(TimePoint time) {
  return static_cast<double>(std::chrono::duration_cast<seconds>(time.time_since_epoch()).count());
}

}  // namespace

SidecarMetrics::SidecarMetrics(metrics::Registry& registry)
    : expiration(registry.Gauge("certctl_certificate_expiration_timestamp_seconds",
                                "When the certificate stops being valid (notAfter), in unix "
                                "seconds; role is ca or leaf.",
                                {"secret", "role"})),
      not_before(registry.Gauge("certctl_certificate_not_before_timestamp_seconds",
                                "When the certificate became valid (notBefore), in unix "
                                "seconds; role is ca or leaf. With the expiration, its lifetime.",
                                {"secret", "role"})),
      reconciles(registry.Counter("certctl_reconcile_total",
                                  "Reconcile passes by result: ready, not_ready or error.",
                                  {"result"})),
      reconcile_duration(registry.Histogram(
          "certctl_reconcile_duration_seconds", "How long reconcile passes took, by result.",
          {"result"}, {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30})),
      writes(registry.Counter("certctl_writes_total",
                              "Objects certctl wrote, by kind (secret, "
                              "validatingwebhookconfiguration, ...).",
                              {"kind"})),
      ready(registry.Gauge("certctl_ready", "1 while ready (what /readyz answers), else 0.")),
      leader(registry.Gauge("certctl_leader",
                            "1 while this replica may write (it leads, or no election)")),
      last_success(registry.Gauge("certctl_last_successful_reconcile_timestamp_seconds",
                                  "When the last pass that ended ready finished, unix seconds.")),
      api_requests(registry.Counter("certctl_api_requests_total",
                                    "Requests to the Kubernetes API by method and status code "
                                    "(error: no response), retries included.",
                                    {"method", "code"})),
      rotation_phase(registry.Gauge("certctl_ca_rotation_phase",
                                    "The CA rotation step the Secret is in: 0 none, 1 trusting "
                                    "(new CA injected, leaf from the previous one), 2 "
                                    "overlapping (leaf from the new CA, previous still trusted).",
                                    {"secret"})),
      rotations(registry.Counter("certctl_rotations_total",
                                 "Rotations this replica carried out, by kind: ca (a new CA, "
                                 "counted at step 1 or when replaced at once) or leaf.",
                                 {"kind"})),
      call_findings(registry.Gauge("certctl_target_call_findings",
                                   "Target entries the API server could not call as they stand, "
                                   "by finding code: target-name-not-covered (the certificate "
                                   "does not name what the entry calls) or target-invalid.",
                                   {"code"})),
      overwrites(registry.Counter("certctl_overwrites_total",
                                  "Repairs of a field another writer changed after this replica "
                                  "wrote it, by object (kind/name) and field (caBundle, "
                                  "failurePolicy, or a key of the Secret).",
                                  {"object", "field"})),
      failure_policy_held(
          registry.Gauge("certctl_failure_policy_held",
                         "1 while a webhook configuration carries the annotation "
                         "certctl.io/hold-failure-policy, by target (kind/name): with "
                         "--failure-policy-once-ready, certctl changes no failurePolicy in it.",
                         {"target"})),
      conflicting_configuration(registry.Gauge(
          "certctl_conflicting_configuration",
          "1 while another certctl instance manages the Secret under other settings (key type, "
          "cluster domain, CA subject, lifetimes): one of the two leaves the other's "
          "certificate as it is; see /readyz?verbose for which.",
          {"secret"})) {
  for (FindingCode code : {FindingCode::kTargetNameNotCovered, FindingCode::kTargetInvalid}) {
    call_findings.Set({std::string(FindingCodeName(code))}, 0);
  }
}

Sidecar::Sidecar(kube::Client& client, const Clock& clock, SidecarConfig config,
                 SidecarMetrics& metrics, LogSink log)
    : client_(client),
      clock_(clock),
      config_(std::move(config)),
      metrics_(metrics),
      log_(std::move(log)),
      election_(client_, clock_, config_.election,
                Election::Telling{
                    .log = log_,
                    .leader = &metrics_.leader,
                    .warn = [this](const std::string& key,
                                   const std::string& message) { WarnRateLimited(key, message); },
                    // A change of leadership starts a pass.
                    .changed =
                        [this](bool leading) {
                          trigger_.Request(leading ? "became the leader" : "stopped leading");
                        }}),
      events_(client_, clock_,
              [this](const std::string& message) { WarnRateLimited("events", message); }),
      fights_(clock_, Fights::Telling{
                          .log = log_,
                          .event = [this](kube::Json event) { events_.Record(std::move(event)); },
                          .overwrites = &metrics_.overwrites,
                          .instance = config_.instance}) {
  if (config_.serving) {
    serving_ = ReadinessCheck{"serving", false, "waiting for the certificate"};
  }
  metrics_.ready.Set({}, 0);
  heartbeat_ = Millis(clock_.Monotonic());
}

Sidecar::~Sidecar() {
  Stop();
  for (std::thread& thread : threads_) {
    if (thread.joinable()) {
      thread.join();
    }
  }
}

void Sidecar::Stop() {
  {
    const std::lock_guard lock(stop_mutex_);
    stopping_ = true;
  }
  stop_changed_.notify_all();
  client_.WakeWatches();  // a quiet watch would notice `stopping_` only at its next poll
  trigger_.Stop();
}

void Sidecar::Reconcile(const std::string& reason) { trigger_.Request(reason); }

bool Sidecar::Alive() const {
  return Millis(clock_.Monotonic()) - heartbeat_.load() < kAliveWithin.count();
}

bool Sidecar::SleepUnlessStopped(milliseconds duration) {
  std::unique_lock lock(stop_mutex_);
  return stop_changed_.wait_for(lock, duration, [this] { return stopping_.load(); });
}

milliseconds Sidecar::Jittered(milliseconds base, double spread) {
  std::uniform_real_distribution<double> factor(1.0 - spread, 1.0 + spread);
  return milliseconds(
      static_cast<std::int64_t>(static_cast<double>(base.count()) * factor(random_)));
}

void Sidecar::WarnRateLimited(const std::string& key, const std::string& message) {
  const MonotonicTime now = clock_.Monotonic();
  bool repeat = false;
  {
    const std::lock_guard lock(state_mutex_);
    auto& [last_message, last_time] = last_warning_[key];
    repeat = last_message == message && now - last_time < kWarningInterval;
    if (!repeat) {
      last_message = message;
      last_time = now;
    }
  }
  log_(repeat ? LogLevel::kDebug : LogLevel::kWarning, message);
}

void Sidecar::RemoveStaleSets() {
  for (const std::string& name : certdir::RemoveStaleSets(config_.pass.cert_dir)) {
    if (told_foreign_sets_.insert(name).second) {
      log_(LogLevel::kWarning, "certificate folder: left " +
                                   (config_.pass.cert_dir / name).string() +
                                   " alone: it is named like a set of certctl's, but certctl "
                                   "did not write what it holds");
    }
  }
}

bool Sidecar::RunPass(const std::set<std::string>& reasons) {
  const Role role = election_.Leading() ? Role::kLeader : Role::kFollower;
  log_(LogLevel::kDebug, "reconciling: " + JoinWithCommas(reasons));
  const MonotonicTime started = clock_.Monotonic();
  PassConfig pass = config_.pass;
  const std::string secret_object = controller::SecretObjectName(pass.secret.ns, pass.secret.name);
  fights_.BeginPass(secret_object);
  pass.hold_back = [this](const std::string& object, const controller::TargetObject& target) {
    return fights_.HoldsBackTarget(object, target);
  };
  pass.secret_hold_back = [this, secret_object](const kube::Json& secret) {
    return fights_.HoldsBackSecret(secret_object, secret);
  };
  pass.bundle_held_since = [this](const std::string& bundle, bool written) {
    return bundle_hold_.Since(bundle, written, clock_.Now());
  };
  auto report = loop::Reconcile(client_, pass, role, clock_);
  const double took = std::chrono::duration<double>(clock_.Monotonic() - started).count();
  if (report && report->failure) {
    // What the pass wrote before a later step failed is told all the same.
    TellWrites(*report);
    if (role == Role::kLeader) {
      fights_.NoteRepairs(*report, config_.pass.secret.ns, config_.pass.secret.name);
      RecordWrites(*report);
    }
    report = tl::unexpected<Error>(*report->failure);
  }
  if (!report) {
    metrics_.reconciles.Add({"error"});
    metrics_.reconcile_duration.Observe({"error"}, took);
    backoff_ =
        std::min(std::max(backoff_ * 2, kFirstBackoff), internal::MaxBackoffAfter(report.error()));
    WarnRateLimited("pass", "reconcile failed: " + report.error().message());
    // An unreachable API changes neither the files the webhook serves nor the bundles the API
    // server trusts: keep the last verdict while the certificate it judged is still valid,
    // so a webhook does not leave its Service over an API blip. Anything else (a refusal, a
    // bad Secret, a folder that cannot be written) is not ready.
    bool keep = false;
    {
      const std::lock_guard lock(state_mutex_);
      keep = certificate_.ok && ApiUnreachable(report.error()) && valid_until_ &&
             clock_.Now() < *valid_until_;
    }
    if (!keep) {
      // The pass stopped before judging the targets: what they held before is not known now
      // (RBAC revoked hides a foreign caBundle), so those checks do not go on saying ok.
      SetTargetChecksUnknown("not judged: the last pass failed (see certificate)");
      SetCertificateReadiness(false, report.error().message(), {}, std::nullopt);
    }
    return false;
  }
  backoff_ = milliseconds(0);
  folder_stale_ = !report->folder_stale.empty();
  // A pass whose targets call names the certificate lacks did not end ready either.
  const bool callable = !report->call_findings || report->call_findings->empty();
  const bool pass_ready = report->ready && report->injected;
  const std::string result = pass_ready && callable ? "ready" : "not_ready";
  metrics_.reconciles.Add({result});
  metrics_.reconcile_duration.Observe({result}, took);
  const std::string secret = config_.pass.secret.ns + "/" + config_.pass.secret.name;
  if (report->ca_not_after) {
    metrics_.expiration.Set({secret, "ca"}, UnixSeconds(*report->ca_not_after));
  }
  if (report->leaf_not_after) {
    metrics_.expiration.Set({secret, "leaf"}, UnixSeconds(*report->leaf_not_after));
  }
  if (report->ca_not_before) {
    metrics_.not_before.Set({secret, "ca"}, UnixSeconds(*report->ca_not_before));
  }
  if (report->leaf_not_before) {
    metrics_.not_before.Set({secret, "leaf"}, UnixSeconds(*report->leaf_not_before));
  }
  TellWrites(*report);
  if (report->folder_written) {
    log_(LogLevel::kInfo, "wrote a new set to " + config_.pass.cert_dir.string());
  }
  if (pass_ready && callable) {
    metrics_.last_success.Set({}, UnixSeconds(clock_.Now()));
  }
  if (!report->names_awaited.empty()) {
    WarnRateLimited("names", report->names_awaited);
  }
  if (!report->folder_stale.empty()) {
    WarnRateLimited("folder", report->folder_stale +
                                  "; the webhook goes on serving the set the folder holds, which "
                                  "the Secret's CA bundle still trusts");
  }
  {
    const std::lock_guard lock(state_mutex_);
    valid_until_ = report->leaf_not_after;
    if (report->ca_not_after && (!valid_until_ || *report->ca_not_after < *valid_until_)) {
      valid_until_ = report->ca_not_after;
    }
  }
  if (report->call_findings) {
    SetCallableReadiness(*report->call_findings, role);
  }
  SetCertificateReadiness(report->ready, report->not_ready, std::move(report->target_bundles),
                          std::pair{report->injected, report->not_injected});
  // After readiness: hundreds of Events (one per repaired target) must not hold it back.
  if (role == Role::kLeader) {
    fights_.NoteRepairs(*report, config_.pass.secret.ns, config_.pass.secret.name);
    RecordWrites(*report);
  }
  if (role == Role::kLeader) {
    NoteConflict(report->conflict, report->secret_uid);
  }
  if (role == Role::kLeader && config_.fail_closed_once_ready && !report->targets.empty()) {
    NoteFailurePolicyHolds(report->targets);
  }
  bool held_back = !report->held_back.empty();
  std::optional<MonotonicTime> recheck;
  if (role == Role::kLeader && config_.fail_closed_once_ready && pass_ready) {
    bool ready = false;
    {
      const std::lock_guard lock(state_mutex_);
      ready = ReadyLocked();
    }
    if (ready) {
      const Closing closing = FailClosed(report->targets);
      held_back = closing.held_back || held_back;
      // No watch tells when the webhook's Service or its endpoints come: look again soon.
      recheck = KeptIgnoreRecheck(closing.kept_because);
    }
  }
  repair_due_at_ = held_back ? fights_.NextRelease() : std::nullopt;
  if (recheck && (!repair_due_at_ || *recheck < *repair_due_at_)) {
    repair_due_at_ = recheck;
  }
  return report->folder_written;
}

std::optional<MonotonicTime> Sidecar::KeptIgnoreRecheck(const std::string& kept_because) {
  if (kept_because != kept_because_) {  // something moved: look again soon
    kept_because_ = kept_because;
    kept_recheck_ = milliseconds(0);
    kept_recheck_at_.reset();
  }
  if (kept_because.empty()) {
    return std::nullopt;
  }
  // Passes for other reasons look too, but only the recheck itself moves it further out.
  const MonotonicTime now = clock_.Monotonic();
  if (!kept_recheck_at_ || now >= *kept_recheck_at_) {
    kept_recheck_ = std::clamp(kept_recheck_ * 2, kKeptIgnoreFirstRecheck, kKeptIgnoreMaxRecheck);
    kept_recheck_at_ = now + kept_recheck_;
  }
  return kept_recheck_at_;
}

void Sidecar::Run() {
  for (const WatchSpec& spec : Watches()) {
    threads_.emplace_back([this, spec] { WatchLoop(spec); });
  }
  if (election_.Enabled()) {
    election_.Attempt();  // before the first pass
    threads_.emplace_back(
        [this] { election_.Loop([this](milliseconds wait) { return SleepUnlessStopped(wait); }); });
  }
  if (config_.serving) {
    threads_.emplace_back([this] { ServingLoop(); });
  }
  const milliseconds resync = config_.resync;
  TimePoint next_resync = clock_.Now() + Jittered(resync, 0.1);
  MonotonicTime retry_at = MonotonicTime::max();  // max: no retry pending
  MonotonicTime last_pass = clock_.Monotonic();
  // After the folder got a new set: when to remove the replaced one (max: nothing to do).
  MonotonicTime remove_stale_sets_at = MonotonicTime::max();
  trigger_.Request("start");
  while (!trigger_.stopped()) {
    heartbeat_ = Millis(clock_.Monotonic());
    milliseconds wait = kHeartbeat;
    wait = std::min(wait, std::chrono::ceil<milliseconds>(next_resync - clock_.Now()));
    if (next_step_at_) {
      wait = std::min(wait, std::chrono::ceil<milliseconds>(*next_step_at_ - clock_.Now()));
    }
    for (const auto& due : {repair_due_at_, events_.NextDue()}) {
      if (due) {
        wait = std::min(wait, std::chrono::ceil<milliseconds>(*due - clock_.Monotonic()));
      }
    }
    if (retry_at != MonotonicTime::max()) {
      wait = std::min(wait, std::chrono::ceil<milliseconds>(retry_at - clock_.Monotonic()));
    }
    // A failing pass has its own backoff; only a blind but otherwise healthy loop polls.
    if (remove_stale_sets_at != MonotonicTime::max()) {
      wait = std::min(wait,
                      std::chrono::ceil<milliseconds>(remove_stale_sets_at - clock_.Monotonic()));
    }
    const bool poll = failing_watches_ > 0 && backoff_ == milliseconds(0);
    if (poll) {
      wait = std::min(
          wait, std::chrono::ceil<milliseconds>(last_pass + kPollWhileBlind - clock_.Monotonic()));
    }
    auto requested = trigger_.Wait(std::max(wait, milliseconds(0)));
    if (trigger_.stopped()) {
      break;
    }
    std::set<std::string> reasons = requested.value_or(std::set<std::string>());
    if (clock_.Monotonic() >= retry_at) {
      reasons.insert("retry");
    }
    if (poll && clock_.Monotonic() >= last_pass + kPollWhileBlind) {
      reasons.insert("polling while a watch is down");
    }
    if (clock_.Monotonic() >= remove_stale_sets_at) {
      RemoveStaleSets();
      remove_stale_sets_at = MonotonicTime::max();
    }
    // The wall clock, not the monotonic one: after a suspend or a clock step the
    // certificates are judged against the real date, so the resync must be too.
    if (next_step_at_ && clock_.Now() >= *next_step_at_) {
      reasons.insert("CA rotation step due");
      next_step_at_.reset();  // the pass says when the next one is
    }
    if (repair_due_at_ && clock_.Monotonic() >= *repair_due_at_) {
      reasons.insert("a held-back repair is due");
      repair_due_at_.reset();  // the pass says when the next one is
    }
    RecordDueFoldedEvents();
    if (clock_.Now() >= next_resync) {
      reasons.insert("resync");
      next_resync = clock_.Now() + Jittered(resync, 0.1);
    }
    if (reasons.empty()) {
      continue;
    }
    heartbeat_ = Millis(clock_.Monotonic());
    if (RunPass(reasons)) {
      remove_stale_sets_at = clock_.Monotonic() + kStaleSetGrace;
    }
    last_pass = clock_.Monotonic();
    if (backoff_ > milliseconds(0)) {
      retry_at = clock_.Monotonic() + Jittered(backoff_, 0.5);
    } else if (folder_stale_) {
      retry_at = clock_.Monotonic() + kStaleFolderRetry;
    } else if (NotReady()) {
      retry_at = clock_.Monotonic() + kNotReadyRetry;
    } else {
      retry_at = MonotonicTime::max();
    }
  }
  Stop();
  for (std::thread& thread : threads_) {
    thread.join();
  }
  threads_.clear();
  if (remove_stale_sets_at != MonotonicTime::max()) {
    RemoveStaleSets();
  }
  if (const auto& spec = config_.pass.secret; spec.issuer) {
    if (auto stepped = controller::StepAside(client_, spec.ns, spec.name, *spec.issuer); !stepped) {
      log_(LogLevel::kWarning, "handing over " + controller::SecretObjectName(spec.ns, spec.name) +
                                   ": " + stepped.error().message());
    }
  }
  if (!config_.ready_file.empty()) {
    std::error_code error;
    std::filesystem::remove(config_.ready_file, error);
  }
}

}  // namespace certctl::loop
