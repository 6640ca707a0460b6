#include "certctl/loop/sidecar.h"

#include <algorithm>
#include <fstream>
#include <system_error>

#include "certctl/certdir/cert_dir.h"
#include "certctl/controller/ensure_secret.h"
#include "certctl/controller/failure_policy.h"
#include "certctl/controller/secret.h"
#include "certctl/controller/targets.h"
#include "certctl/kube/list_watch.h"
#include "certctl/loop/events.h"
#include "certctl/probe/handshake.h"

namespace certctl::loop {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The loop wakes at least this often: to notice a wall-clock jump past the resync time, and
// to show /healthz it is alive.
constexpr milliseconds kHeartbeat{5000};
constexpr milliseconds kFirstBackoff{500};
constexpr milliseconds kMaxBackoff{60000};
// A pass that ends not ready is tried again after this even without a watch event: a safety
// net, since the events that fix it (the target appearing, the leader writing) trigger one.
constexpr milliseconds kNotReadyRetry{30000};
constexpr seconds kWarningInterval{60};
constexpr milliseconds kWatchFirstBackoff{1000};
constexpr milliseconds kAliveWithin{60000};
// While a watch is failing, a pass this often re-judges readiness and repairs what changed
// unseen.
constexpr milliseconds kPollWhileBlind{5000};
// The serving handshake: how soon again after a failure (from 100 ms, doubling: the webhook
// usually starts just after its certificate appears), and how often once it holds (so a
// webhook that stopped serving drops readiness).
constexpr milliseconds kServingFirstRetry{100};
constexpr milliseconds kServingRetry{1000};
constexpr milliseconds kServingRecheck{5000};
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

// "validatingwebhookconfiguration/hook" -> "validatingwebhookconfiguration".
std::string KindOf(const std::string& object) { return object.substr(0, object.find('/')); }

std::string Join(const std::set<std::string>& reasons) {
  std::string text;
  for (const std::string& reason : reasons) {
    text += (text.empty() ? "" : ", ") + reason;
  }
  return text;
}

}  // namespace

SidecarMetrics::SidecarMetrics(metrics::Registry& registry)
    : expiration(registry.Gauge("certctl_certificate_expiration_timestamp_seconds",
                                "When the certificate stops being valid (notAfter), in unix "
                                "seconds; role is ca or leaf.",
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
                                   {"code"})) {
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
      log_(std::move(log)) {
  if (config_.election) {
    elector_.emplace(client_, clock_, *config_.election);
  } else {
    leading_ = true;
  }
  if (config_.serving) {
    serving_ = ReadinessCheck{"serving", false, "waiting for the certificate"};
  }
  metrics_.ready.Set({}, 0);
  metrics_.leader.Set({}, leading_ ? 1 : 0);
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
  trigger_.Stop();
}

void Sidecar::Reconcile(const std::string& reason) { trigger_.Request(reason); }

std::optional<std::string> Sidecar::NotReady(const std::set<std::string>& excluded) const {
  for (const ReadinessCheck& check : Readiness()) {
    if (!check.ok && !excluded.contains(check.name)) {
      return check.name == "certificate" ? check.reason : check.name + ": " + check.reason;
    }
  }
  return std::nullopt;
}

std::vector<ReadinessCheck> Sidecar::Readiness() const {
  const std::lock_guard lock(state_mutex_);
  std::vector<ReadinessCheck> checks{certificate_, callable_};
  if (serving_) {
    checks.push_back(*serving_);
  }
  return checks;
}

bool Sidecar::ReadyLocked() const {
  return certificate_.ok && callable_.ok && (!serving_ || serving_->ok);
}

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

std::vector<Sidecar::WatchSpec> Sidecar::Watches() const {
  std::vector<WatchSpec> watches;
  const auto by_name = [](std::string_view name) {
    kube::ListOptions options;
    options.field_selector = "metadata.name=" + std::string(name);
    return options;
  };
  const auto& secret = config_.pass.secret;
  watches.push_back({&kube::kSecrets, secret.ns, by_name(secret.name),
                     controller::SecretObjectName(secret.ns, secret.name)});
  const auto& targets = config_.pass.targets;
  const auto add_named = [&](inject::TargetKind kind, const std::vector<std::string>& names) {
    for (const std::string& name : names) {
      watches.push_back({&controller::ResourceFor(kind), "", by_name(name),
                         controller::TargetObjectName(kind, name)});
    }
  };
  add_named(inject::TargetKind::kValidatingWebhookConfiguration, targets.validating_webhooks);
  add_named(inject::TargetKind::kMutatingWebhookConfiguration, targets.mutating_webhooks);
  add_named(inject::TargetKind::kCustomResourceDefinition, targets.crds);
  add_named(inject::TargetKind::kApiService, targets.api_services);
  if (!targets.webhook_selector.empty()) {
    for (const auto* type :
         {&kube::kValidatingWebhookConfigurations, &kube::kMutatingWebhookConfigurations}) {
      kube::ListOptions options;
      options.label_selector = targets.webhook_selector;
      watches.push_back(
          {type, "", options, std::string(type->resource) + " " + targets.webhook_selector});
    }
  }
  return watches;
}

void Sidecar::WatchLoop(const WatchSpec& spec) {
  kube::ListWatchOptions options;
  options.list = spec.list;
  options.server_timeout = config_.watch_timeout;
  bool failing = false;
  const auto set_failing = [&](bool now_failing) {
    if (now_failing != failing) {
      failing = now_failing;
      failing_watches_ += failing ? 1 : -1;
    }
  };
  kube::ListWatchHandlers handlers;
  handlers.on_list = [&](const std::vector<kube::Json>&, const std::string&) {
    set_failing(false);
    trigger_.Request("listed " + spec.what);
  };
  handlers.on_event = [&](const kube::WatchEvent& event) {
    set_failing(false);
    const char* change = event.type == kube::WatchEventType::kAdded     ? "added"
                         : event.type == kube::WatchEventType::kDeleted ? "deleted"
                                                                        : "modified";
    trigger_.Request(spec.what + " " + change);
  };
  handlers.on_retry = [&](const Error& error, milliseconds delay) {
    set_failing(true);
    log_(LogLevel::kDebug, "watch " + spec.what + ": " + error.message() + "; again in " +
                               std::to_string(delay.count()) + "ms");
  };
  milliseconds backoff = kWatchFirstBackoff;
  while (!stopping_) {
    auto ended = kube::ListWatch(
        client_, *spec.type, spec.ns, options, handlers, [this] { return stopping_.load(); },
        clock_);
    if (stopping_) {
      set_failing(false);
      return;
    }
    set_failing(true);
    // Only failures a retry cannot fix end ListWatch (403, 401, a bad answer); RBAC or
    // credentials may be fixed while certctl runs, so keep trying, and keep saying why.
    WarnRateLimited("watch " + spec.what,
                    "watch " + spec.what + ": " +
                        (ended ? std::string("ended") : ended.error().message()) + "; retrying");
    if (SleepUnlessStopped(Jittered(backoff, 0.5))) {
      break;
    }
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
  set_failing(false);
}

void Sidecar::ElectionAttempt() {
  auto attempt = elector_->TryAcquireOrRenew();
  const bool now_leading = elector_->IsLeader();
  if (!attempt) {
    WarnRateLimited("lease", "leader election: " + attempt.error().message());
  }
  if (now_leading != leading_.exchange(now_leading)) {
    metrics_.leader.Set({}, now_leading ? 1 : 0);
    log_(LogLevel::kInfo, now_leading
                              ? "became the leader (" + config_.election->identity + ")"
                              : "stopped leading; following " + elector_->observed_holder());
    trigger_.Request(now_leading ? "became the leader" : "stopped leading");
  }
}

void Sidecar::ElectionLoop() {
  // Run made the first attempt before the first pass.
  while (!stopping_) {
    if (SleepUnlessStopped(elector_->NextAttemptIn())) {
      break;
    }
    ElectionAttempt();
  }
  if (auto released = elector_->Release(); !released) {
    log_(LogLevel::kWarning, "releasing the lease: " + released.error().message());
  } else if (leading_) {
    log_(LogLevel::kInfo, "released the lease");
  }
}

void Sidecar::SetCertificateReadiness(bool ready, const std::string& reason,
                                      std::vector<std::string> target_bundles) {
  bool changed = false;
  {
    const std::lock_guard lock(state_mutex_);
    const bool was_ready = ReadyLocked();
    changed = ready != certificate_.ok;
    certificate_.ok = ready;
    certificate_.reason = reason;
    target_bundles_ = std::move(target_bundles);
    PublishReadiness(was_ready);
  }
  // The ready file tells the webhook its certificate is there, so it follows this check
  // alone: a webhook that waits for it cannot pass the serving check before it starts.
  if (!config_.ready_file.empty() && changed) {
    std::error_code error;
    if (ready) {
      std::ofstream(config_.ready_file) << "ready\n";
    } else {
      std::filesystem::remove(config_.ready_file, error);
    }
  }
  if (config_.serving) {
    {
      const std::lock_guard lock(stop_mutex_);
      serving_probe_due_ = true;
    }
    stop_changed_.notify_all();
  }
}

void Sidecar::SetServingReadiness(bool ready, const std::string& reason) {
  const std::lock_guard lock(state_mutex_);
  const bool was_ready = ReadyLocked();
  const bool changed = ready != serving_->ok || reason != serving_->reason;
  serving_->ok = ready;
  serving_->reason = reason;
  serving_passed_ = serving_passed_ || ready;
  // The last check to pass: the failurePolicy waits for it, and is the loop's to write.
  if (config_.fail_closed_once_ready && ready && !was_ready && ReadyLocked()) {
    trigger_.Request("ready by every check");
  }
  if (changed && certificate_.ok) {
    // Until the webhook first answers, failing is how it starts (it starts after certctl):
    // worth a line, not a warning.
    log_(ready || !serving_passed_ ? LogLevel::kInfo : LogLevel::kWarning,
         ready ? "the webhook at " + FormatHostPort(config_.serving->address) +
                     " verifies against the targets' caBundle"
               : "serving check: " + reason);
  }
  PublishReadiness(was_ready);
}

void Sidecar::FailClosed(const std::vector<controller::TargetObject>& targets) {
  auto closed = controller::FailClosed(client_, targets);
  if (!closed) {
    WarnRateLimited("failure-policy", closed.error().message());
    return;
  }
  const std::string secret_object =
      controller::SecretObjectName(config_.pass.secret.ns, config_.pass.secret.name);
  for (std::size_t i = 0; i < closed->patched.size(); ++i) {
    metrics_.writes.Add({KindOf(closed->patched[i])});
    log_(LogLevel::kInfo, "ready: set failurePolicy Fail on the entries of " + closed->patched[i] +
                              " that had Ignore");
    const kube::Json event = MakeEvent(
        closed->patched_references[i], "FailurePolicySet",
        "set failurePolicy Fail on the entries that had Ignore, as " + secret_object + " is ready",
        config_.instance, clock_.Now());
    if (auto recorded = RecordEvent(client_, event); !recorded) {
      WarnRateLimited("events", recorded.error().message());
    }
  }
}

void Sidecar::SetCallableReadiness(const std::vector<Finding>& findings, Role role) {
  std::map<FindingCode, int> counts{{FindingCode::kTargetNameNotCovered, 0},
                                    {FindingCode::kTargetInvalid, 0}};
  for (const Finding& finding : findings) {
    ++counts[finding.code];
  }
  for (const auto& [code, count] : counts) {
    metrics_.call_findings.Set({std::string(FindingCodeName(code))}, count);
  }
  {
    const std::lock_guard lock(state_mutex_);
    const bool was_ready = ReadyLocked();
    const std::string reason = JoinFindings(findings);
    if (!findings.empty() && reason != callable_.reason) {
      log_(LogLevel::kWarning, "the API server cannot call every target: " + reason);
    }
    callable_.ok = findings.empty();
    callable_.reason = reason;
    PublishReadiness(was_ready);
  }
  // One Warning Event per distinct finding, not one per pass; a finding that clears and
  // comes back is told again.
  std::set<std::string> current;
  std::vector<kube::Json> events;
  const auto& secret = config_.pass.secret;
  for (const Finding& finding : findings) {
    const std::string key = finding.object + ": " + finding.message;
    current.insert(key);
    if (role == Role::kLeader && !warned_calls_.contains(key)) {
      events.push_back(MakeEvent({"v1", "Secret", secret.ns, secret.name, ""},
                                 finding.code == FindingCode::kTargetNameNotCovered
                                     ? "TargetNameNotCovered"
                                     : "TargetInvalid",
                                 key, config_.instance, clock_.Now(), EventType::kWarning));
    }
  }
  warned_calls_ = role == Role::kLeader ? std::move(current) : std::set<std::string>();
  for (const kube::Json& event : events) {
    if (auto recorded = RecordEvent(client_, event); !recorded) {
      WarnRateLimited("events", recorded.error().message());
    }
  }
}

void Sidecar::PublishReadiness(bool was_ready) {
  const bool ready = ReadyLocked();
  metrics_.ready.Set({}, ready ? 1 : 0);
  if (ready == was_ready) {
    return;
  }
  if (ready) {
    log_(LogLevel::kInfo, "ready");
  } else {
    const ReadinessCheck& failing = !certificate_.ok ? certificate_
                                    : !callable_.ok  ? callable_
                                                     : *serving_;
    log_(LogLevel::kInfo,
         "not ready: " + (failing.name == "certificate" ? std::string() : failing.name + ": ") +
             failing.reason);
  }
}

void Sidecar::ServingLoop() {
  const ServingCheck& check = *config_.serving;
  milliseconds retry = kServingFirstRetry;
  while (!stopping_) {
    std::vector<std::string> bundles;
    bool certificate_ready = false;
    {
      const std::lock_guard lock(state_mutex_);
      certificate_ready = certificate_.ok;
      bundles = target_bundles_;
    }
    bool ok = false;
    std::string reason = "waiting for the certificate";
    if (certificate_ready && !bundles.empty()) {
      ok = true;
      reason.clear();
      // Every bundle a target holds must verify: the API server uses each target's own.
      for (const std::string& bundle : bundles) {
        if (auto verified =
                probe::VerifyHandshake(check.address, check.server_name, bundle, check.timeout);
            !verified) {
          ok = false;
          reason = verified.error().message();
          break;
        }
      }
    }
    SetServingReadiness(ok, reason);
    const milliseconds next = ok ? kServingRecheck : retry;
    retry = ok ? kServingFirstRetry : std::min(retry * 2, kServingRetry);
    std::unique_lock lock(stop_mutex_);
    stop_changed_.wait_for(lock, next, [this] { return stopping_.load() || serving_probe_due_; });
    serving_probe_due_ = false;
  }
}

bool Sidecar::RunPass(const std::set<std::string>& reasons) {
  const Role role = leading_ ? Role::kLeader : Role::kFollower;
  log_(LogLevel::kDebug, "reconciling: " + Join(reasons));
  const MonotonicTime started = clock_.Monotonic();
  auto report = loop::Reconcile(client_, config_.pass, role, clock_);
  const double took = std::chrono::duration<double>(clock_.Monotonic() - started).count();
  if (report && report->failure) {
    // What the pass wrote before a later step failed is told all the same.
    TellWrites(*report);
    if (role == Role::kLeader) {
      RecordWrites(*report);
    }
    report = tl::unexpected<Error>(*report->failure);
  }
  if (!report) {
    metrics_.reconciles.Add({"error"});
    metrics_.reconcile_duration.Observe({"error"}, took);
    backoff_ = std::min(std::max(backoff_ * 2, kFirstBackoff), kMaxBackoff);
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
      SetCertificateReadiness(false, report.error().message(), {});
    }
    return false;
  }
  backoff_ = milliseconds(0);
  // A pass whose targets call names the certificate lacks did not end ready either.
  const bool callable = !report->call_findings || report->call_findings->empty();
  const std::string result = report->ready && callable ? "ready" : "not_ready";
  metrics_.reconciles.Add({result});
  metrics_.reconcile_duration.Observe({result}, took);
  const std::string secret = config_.pass.secret.ns + "/" + config_.pass.secret.name;
  if (report->ca_not_after) {
    metrics_.expiration.Set({secret, "ca"}, UnixSeconds(*report->ca_not_after));
  }
  if (report->leaf_not_after) {
    metrics_.expiration.Set({secret, "leaf"}, UnixSeconds(*report->leaf_not_after));
  }
  TellWrites(*report);
  if (report->folder_written) {
    log_(LogLevel::kInfo, "wrote a new set to " + config_.pass.cert_dir.string());
  }
  if (report->ready && callable) {
    metrics_.last_success.Set({}, UnixSeconds(clock_.Now()));
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
  SetCertificateReadiness(report->ready, report->not_ready, std::move(report->target_bundles));
  // After readiness: hundreds of Events (one per repaired target) must not hold it back.
  if (role == Role::kLeader) {
    RecordWrites(*report);
  }
  if (role == Role::kLeader && config_.fail_closed_once_ready && report->ready) {
    bool ready = false;
    {
      const std::lock_guard lock(state_mutex_);
      ready = ReadyLocked();
    }
    if (ready) {
      FailClosed(report->targets);
    }
  }
  return report->folder_written;
}

void Sidecar::TellWrites(const PassReport& report) {
  const std::string secret = config_.pass.secret.ns + "/" + config_.pass.secret.name;
  const std::string secret_object =
      controller::SecretObjectName(config_.pass.secret.ns, config_.pass.secret.name);
  for (const SecretChange& change : report.secret_changes) {
    metrics_.writes.Add({"secret"});
    if (change.action == controller::SecretAction::kCaRotationStarted ||
        change.action == controller::SecretAction::kCaReplaced) {
      metrics_.rotations.Add({"ca"});
    } else if (change.action == controller::SecretAction::kLeafReissued) {
      metrics_.rotations.Add({"leaf"});
    }
    log_(LogLevel::kInfo, std::string(controller::SecretActionName(change.action)) + ": " +
                              secret_object +
                              (change.reason.empty() ? "" : " (" + change.reason + ")"));
  }
  metrics_.rotation_phase.Set({secret}, static_cast<double>(report.rotation));
  next_step_at_ = report.next_step_at;
  for (const std::string& object : report.patched) {
    metrics_.writes.Add({KindOf(object)});
    log_(LogLevel::kInfo, "injected the CA bundle into " + object);
  }
}

void Sidecar::RecordWrites(const PassReport& report) {
  const auto& secret = config_.pass.secret;
  const std::string secret_object = controller::SecretObjectName(secret.ns, secret.name);
  std::vector<kube::Json> events;
  for (const SecretChange& change : report.secret_changes) {
    const controller::ObjectReference secret_reference{"v1", "Secret", secret.ns, secret.name,
                                                       change.uid};
    const std::string why = change.reason.empty() ? "" : ": " + change.reason;
    const auto about_secret = [&](std::string_view reason, const std::string& message) {
      events.push_back(
          MakeEvent(secret_reference, reason, message, config_.instance, clock_.Now()));
    };
    switch (change.action) {
      case controller::SecretAction::kNone:
        break;
      case controller::SecretAction::kCreated:
        about_secret("Created", "created with a new CA and server certificate");
        break;
      case controller::SecretAction::kLeafReissued:
        about_secret("LeafReissued", "re-issued the server certificate" + why);
        break;
      case controller::SecretAction::kCaReplaced:
        about_secret("CAReplaced", "replaced the CA and the server certificate" + why);
        break;
      case controller::SecretAction::kCaRotationStarted:
        about_secret("CARotationStarted",
                     "step 1 of 3: a new CA is trusted next to the current one" + why);
        break;
      case controller::SecretAction::kLeafMovedToNewCa:
        about_secret("CARotationLeafMoved",
                     "step 2 of 3: the server certificate is issued by the new CA" + why);
        break;
      case controller::SecretAction::kPreviousCaRetired:
        about_secret("CARotationFinished",
                     "step 3 of 3: the previous CA is no longer trusted" + why);
        break;
      case controller::SecretAction::kAdopted:
        about_secret("Adopted", "now managed by certctl");
        break;
    }
  }
  for (const controller::ObjectReference& target : report.patched_references) {
    events.push_back(MakeEvent(target, "CABundleInjected",
                               "injected the CA bundle of " + secret_object, config_.instance,
                               clock_.Now()));
  }
  for (const kube::Json& event : events) {
    if (auto recorded = RecordEvent(client_, event); !recorded) {
      WarnRateLimited("events", recorded.error().message());
    }
  }
}

void Sidecar::Run() {
  for (const WatchSpec& spec : Watches()) {
    threads_.emplace_back([this, spec] { WatchLoop(spec); });
  }
  if (elector_) {
    // Before the first pass: a replica that can lead at once should not start as a follower
    // and read for nothing.
    ElectionAttempt();
    threads_.emplace_back([this] { ElectionLoop(); });
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
      certdir::RemoveStaleSets(config_.pass.cert_dir);
      remove_stale_sets_at = MonotonicTime::max();
    }
    // The wall clock, not the monotonic one: after a suspend or a clock step the
    // certificates are judged against the real date, so the resync must be too.
    if (next_step_at_ && clock_.Now() >= *next_step_at_) {
      reasons.insert("CA rotation step due");
      next_step_at_.reset();  // the pass says when the next one is
    }
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
    certdir::RemoveStaleSets(config_.pass.cert_dir);
  }
  if (!config_.ready_file.empty()) {
    std::error_code error;
    std::filesystem::remove(config_.ready_file, error);
  }
}

}  // namespace certctl::loop
