#include "certctl/fleet/controller.h"

#include <algorithm>

#include "certctl/controller/secret.h"
#include "certctl/controller/targets.h"
#include "certctl/kube/list_watch.h"
#include "certctl/loop/events.h"
#include "certctl/util/text.h"

namespace certctl::fleet {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kWatchFirstBackoff{1000};
constexpr milliseconds kWatchMaxBackoff{60000};
constexpr milliseconds kHeartbeat{10000};
constexpr milliseconds kAliveWithin{60000};
// Entries kept at Ignore (no Service, no ready endpoint) are judged again after this, doubling
// up to the longest while nothing changes; an event on the target or its Secret comes sooner.
constexpr milliseconds kKeptFirstRecheck{5000};
constexpr milliseconds kKeptMaxRecheck{300000};
// Secrets only injected from are watched by name, each on a thread and a connection of its own,
// up to this many; the others are read again on their targets' changes and at the resync.
constexpr std::size_t kMaxInjectedSecretWatches = 64;

std::int64_t Millis(MonotonicTime time) {
  return std::chrono::duration_cast<milliseconds>(time.time_since_epoch()).count();
}

controller::ObjectReference ReferenceTo(const kube::ResourceType& type, const kube::Json& object) {
  const std::string group = type.group.empty() ? "" : std::string(type.group) + "/";
  return {group + std::string(type.version), std::string(type.kind),
          MetadataField(object, "namespace"), MetadataField(object, "name"),
          MetadataField(object, "uid")};
}

const kube::ResourceType& TypeOf(inject::TargetKind kind) { return controller::ResourceFor(kind); }

}  // namespace

ControllerMetrics::ControllerMetrics(metrics::Registry& registry)
    : reconciles(registry.Counter("certctl_controller_reconcile_total",
                                  "Reconciles of one Secret and its targets, by result.",
                                  {"result"})),
      reconcile_duration(registry.Histogram("certctl_controller_reconcile_duration_seconds",
                                            "How long reconciles of one Secret took, by result.",
                                            {"result"},
                                            {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10})),
      writes(registry.Counter("certctl_controller_writes_total",
                              "Writes to the cluster, by kind (secret, and each target kind).",
                              {"kind"})),
      secrets(registry.Gauge("certctl_controller_secrets",
                             "Secrets the annotations name (issued or injected from).", {})),
      annotated(registry.Gauge("certctl_controller_annotated_objects",
                               "Objects carrying certctl's annotations, by kind (service, "
                               "target); nothing is kept of the others.",
                               {"kind"})),
      queue(registry.Gauge("certctl_controller_queue",
                           "Secrets waiting to be reconciled: due now (ready) or later "
                           "(waiting).",
                           {"state"})),
      problems(registry.Counter("certctl_controller_problems_total",
                                "Annotations that could not be honoured, by the reason of "
                                "their Warning Event.",
                                {"reason"})),
      call_findings(registry.Gauge("certctl_controller_target_call_findings",
                                   "Entries of a target the API server could not call as they "
                                   "stand, by target (kind/name) and finding code.",
                                   {"target", "code"})),
      overwrites(registry.Counter("certctl_overwrites_total",
                                  "Repairs of a field another writer changed after certctl "
                                  "wrote it, by object (kind/name) and field.",
                                  {"object", "field"})),
      leader(registry.Gauge("certctl_leader", "1 while this replica works (leads).", {})),
      ready(registry.Gauge("certctl_ready", "1 once every watch has listed.", {})),
      api_requests(registry.Counter("certctl_api_requests_total",
                                    "Requests to the API server, by method and status code.",
                                    {"method", "code"})) {}

Controller::Controller(kube::Client& client, const Clock& clock, ControllerConfig config,
                       ControllerMetrics& metrics, loop::LogSink log)
    : copies_(client),
      client_(copies_),
      clock_(clock),
      config_(std::move(config)),
      metrics_(metrics),
      log_(std::move(log)),
      queue_(clock),
      election_(client_, clock_, config_.election,
                loop::Election::Telling{
                    .log = log_,
                    .leader = &metrics_.leader,
                    .warn = [this](const std::string& key,
                                   const std::string& message) { WarnRateLimited(key, message); },
                    .changed =
                        [this](bool leading) {
                          if (leading) {
                            BecameLeader();
                          }
                        }}),
      fights_(clock,
              loop::Fights::Telling{
                  .log = log_,
                  .event = [this](kube::Json event) { events_.Record(std::move(event)); },
                  .overwrites = &metrics_.overwrites,
                  .instance = config_.instance}),
      // Events never stop the work, nor slow it: written by a thread of their own. Why one
      // was not written is worth a debug line.
      events_(
          client_, clock_,
          [this](const std::string& message) {
            log_(loop::LogLevel::kDebug, "recording an Event: " + message);
          },
          loop::EventRecorder::Delivery::kBackground) {
  metrics_.ready.Set({}, 0);
  heartbeat_ = Millis(clock_.Monotonic());
}

Controller::~Controller() {
  Stop();
  for (std::thread& thread : threads_) {
    if (thread.joinable()) {
      thread.join();
    }
  }
  const std::lock_guard lock(injected_watches_mutex_);
  for (auto& [secret, watch] : injected_watches_) {
    watch.thread.join();
  }
  for (InjectedSecretWatch& watch : ended_watches_) {
    watch.thread.join();
  }
}

std::vector<Controller::WatchSpec> Controller::Watches() const {
  std::vector<WatchSpec> watches;
  // With a selector, Services and Secrets are watched everywhere and only the selected
  // namespaces' are acted on: a namespace that joins needs no new list.
  const std::vector<std::string> scopes =
      config_.namespaces.empty() ? std::vector<std::string>{""} : config_.namespaces;
  if (!config_.namespace_selector.empty()) {
    kube::ListOptions selected;
    selected.label_selector = config_.namespace_selector;
    watches.push_back({Source::kNamespaces, &kube::kNamespaces,
                       inject::TargetKind::kValidatingWebhookConfiguration, "", selected,
                       "namespaces selected by " + config_.namespace_selector});
  }
  for (const std::string& ns : scopes) {
    const std::string where = ns.empty() ? "" : " in " + ns;
    watches.push_back({Source::kServices,
                       &kube::kServices,
                       inject::TargetKind::kValidatingWebhookConfiguration,
                       ns,
                       {},
                       "services" + where});
    kube::ListOptions issued;
    issued.label_selector = kServingCertForLabel;
    watches.push_back({Source::kIssuedSecrets, &kube::kSecrets,
                       inject::TargetKind::kValidatingWebhookConfiguration, ns, issued,
                       "secrets labelled " + std::string(kServingCertForLabel) + where});
  }
  for (const inject::TargetKind kind :
       {inject::TargetKind::kValidatingWebhookConfiguration,
        inject::TargetKind::kMutatingWebhookConfiguration,
        inject::TargetKind::kCustomResourceDefinition, inject::TargetKind::kApiService}) {
    watches.push_back(
        {Source::kTargets, &TypeOf(kind), kind, "", {}, std::string(TypeOf(kind).resource)});
  }
  return watches;
}

std::optional<std::string> Controller::NotReady() const {
  const std::lock_guard lock(index_mutex_);
  if (unlisted_.empty() && watches_ > 0) {
    return std::nullopt;
  }
  if (watches_ == 0) {
    return std::string("starting");
  }
  return "waiting for the first list of " +
         JoinWithCommas(std::vector<std::string>(unlisted_.begin(), unlisted_.end()));
}

bool Controller::Alive() const {
  return Millis(clock_.Monotonic()) - heartbeat_.load() < kAliveWithin.count();
}

void Controller::Stop() {
  {
    const std::lock_guard lock(stop_mutex_);
    stopping_ = true;
  }
  stop_changed_.notify_all();
  queue_.ShutDown();
  client_.WakeWatches();
}

bool Controller::SleepUnlessStopped(milliseconds duration, const std::atomic<bool>* stop) {
  std::unique_lock lock(stop_mutex_);
  return stop_changed_.wait_for(
      lock, duration, [this, stop] { return stopping_.load() || (stop != nullptr && *stop); });
}

void Controller::WarnRateLimited(const std::string& key, const std::string& message) {
  const MonotonicTime now = clock_.Monotonic();
  bool repeat = false;
  {
    const std::lock_guard lock(told_mutex_);
    auto last = last_warning_.find(key);
    repeat = last != last_warning_.end() && now - last->second < std::chrono::minutes(1);
    if (!repeat) {
      last_warning_[key] = now;
    }
  }
  log_(repeat ? loop::LogLevel::kDebug : loop::LogLevel::kWarning, message);
}

// --- watches ----------------------------------------------------------------------------

void Controller::NoteAnnotationLocked(const std::string& key,
                                      const controller::ObjectReference& about,
                                      const std::optional<std::string>& problem,
                                      std::vector<AnnotationProblem>& fresh) {
  if (!problem) {
    annotation_told_.erase(key);
    return;
  }
  if (auto told = annotation_told_.find(key);
      told != annotation_told_.end() && told->second.message == *problem) {
    return;
  }
  annotation_told_[key] = {about, *problem};
  fresh.push_back({about, *problem});
}

void Controller::TellAnnotations(const std::vector<AnnotationProblem>& problems) {
  for (const AnnotationProblem& problem : problems) {
    metrics_.problems.Add({"AnnotationInvalid"});
    log_(loop::LogLevel::kWarning, problem.message + "; it is ignored");
    if (election_.Leading()) {
      RecordAnnotationEvent(problem);
    }
  }
}

void Controller::RecordAnnotationEvent(const AnnotationProblem& problem) {
  events_.Record(loop::MakeEvent(problem.about, "AnnotationInvalid",
                                 problem.message + "; it is ignored", config_.instance,
                                 clock_.Now(), loop::EventType::kWarning));
}

std::vector<std::string> Controller::IndexLocked(const WatchSpec& spec, const kube::Json& object,
                                                 bool deleted,
                                                 std::vector<AnnotationProblem>& fresh) {
  const std::string ns = MetadataField(object, "namespace");
  const std::string name = MetadataField(object, "name");
  if (name.empty()) {
    return {};
  }
  if (spec.source == Source::kNamespaces) {
    const bool was = selected_namespaces_.contains(name);
    if (deleted) {
      selected_namespaces_.erase(name);
    } else {
      selected_namespaces_.insert(name);
    }
    return was == deleted ? SecretsInLocked(name) : std::vector<std::string>{};
  }
  if (spec.source == Source::kServices) {
    const std::string key = NamespacedKey(ns, name);
    Reading<CertificateRequest> reading;
    if (!deleted) {
      reading = ReadCertificateRequest(object);
    }
    NoteAnnotationLocked("service/" + key, ReferenceTo(*spec.type, object), reading.problem, fresh);
    std::optional<std::string> current;
    if (reading.request) {
      current = NamespacedKey(reading.request->ns, reading.request->secret);
    }
    std::vector<std::string> changed = index_.SetService(key, std::move(reading.request));
    if (current) {
      changed.push_back(*current);
    }
    return changed;
  }
  if (spec.source == Source::kTargets) {
    const std::string key = controller::TargetObjectName(spec.kind, name);
    Reading<InjectionRequest> reading;
    if (!deleted) {
      reading = ReadInjectionRequest(spec.kind, object, config_.cert_manager_annotations);
    }
    if (reading.request && !config_.namespaces.empty() &&
        std::find(config_.namespaces.begin(), config_.namespaces.end(),
                  reading.request->secret_ns) == config_.namespaces.end()) {
      reading.problem = key + ": annotation " + reading.request->annotation +
                        " names a Secret in " + reading.request->secret_ns +
                        ", a namespace this controller does not watch (--namespace " +
                        JoinWithCommas(config_.namespaces) + ")";
      reading.request.reset();
    }
    NoteAnnotationLocked(key, ReferenceTo(*spec.type, object), reading.problem, fresh);
    std::optional<std::string> current;
    if (reading.request) {
      current = NamespacedKey(reading.request->secret_ns, reading.request->secret);
      copies_.Keep(*spec.type, object, spec.what);
    } else {
      copies_.Forget(*spec.type, "", name);
    }
    std::vector<std::string> changed = index_.SetTarget(key, std::move(reading.request));
    if (current) {
      changed.push_back(*current);  // its caBundle may have changed: reconciled again
    }
    return changed;
  }
  // An issued Secret, or one only injected from, changed: reconciled again while an annotation
  // names it. An issued one's copy is kept either way (at a start the Secrets may list before
  // the Services that name them); one only injected from while it is named, as its watch by
  // name lasts that long.
  const std::string key = NamespacedKey(ns, name);
  const bool named = index_.Named(key);
  if (deleted || (spec.source == Source::kInjectedSecret && !named)) {
    copies_.Forget(*spec.type, ns, name);
  } else {
    copies_.Keep(*spec.type, object, spec.what);
  }
  return named ? std::vector<std::string>{key} : std::vector<std::string>{};
}

void Controller::ListedPage(const WatchSpec& spec, const kube::Json& page,
                            std::set<std::string>& listed) {
  std::vector<std::string> changed;
  std::vector<AnnotationProblem> fresh;
  {
    const std::lock_guard lock(index_mutex_);
    for (const kube::Json& item : page) {
      const std::string ns = MetadataField(item, "namespace");
      const std::string name = MetadataField(item, "name");
      listed.insert(spec.source == Source::kTargets ? controller::TargetObjectName(spec.kind, name)
                    : spec.source == Source::kNamespaces ? name
                                                         : NamespacedKey(ns, name));
      for (std::string& secret : IndexLocked(spec, item, false, fresh)) {
        changed.push_back(std::move(secret));
      }
    }
  }
  TellAnnotations(fresh);
  Enqueue(changed);
}

void Controller::Listed(const WatchSpec& spec, const std::set<std::string>& listed) {
  std::vector<std::string> gone;
  {
    const std::lock_guard lock(index_mutex_);
    if (spec.source == Source::kServices) {
      gone = index_.KeepServices(spec.ns, listed);
    } else if (spec.source == Source::kTargets) {
      gone = index_.KeepTargets(spec.kind, listed);
    } else if (spec.source == Source::kNamespaces) {
      for (auto it = selected_namespaces_.begin(); it != selected_namespaces_.end();) {
        if (listed.contains(*it)) {
          ++it;
          continue;
        }
        for (std::string& secret : SecretsInLocked(*it)) {
          gone.push_back(std::move(secret));
        }
        it = selected_namespaces_.erase(it);
      }
    }
    if (spec.source != Source::kServices && spec.source != Source::kNamespaces) {
      // Deleted while the watch was down: no event told.
      copies_.ForgetUnlisted(spec.what, [&](std::string_view ns, std::string_view name) {
        return listed.contains(spec.source == Source::kTargets
                                   ? controller::TargetObjectName(spec.kind, name)
                                   : NamespacedKey(std::string(ns), std::string(name)));
      });
    }
    unlisted_.erase(spec.what);
    if (unlisted_.empty() && !index_whole_) {
      // What was asked for while the lists were coming is worked on now, once each.
      index_whole_ = true;
      for (std::string& secret : index_.Secrets()) {
        gone.push_back(std::move(secret));
      }
    }
    metrics_.annotated.Set({"service"}, static_cast<double>(index_.service_count()));
    metrics_.annotated.Set({"target"}, static_cast<double>(index_.target_count()));
    metrics_.secrets.Set({}, static_cast<double>(index_.Secrets().size()));
    metrics_.ready.Set({}, unlisted_.empty() ? 1 : 0);
  }
  Enqueue(gone);
}

void Controller::Changed(const WatchSpec& spec, const kube::WatchEvent& event) {
  const bool deleted = event.type == kube::WatchEventType::kDeleted;
  if (!deleted && spec.source != Source::kServices && spec.source != Source::kNamespaces &&
      copies_.IsEcho(*spec.type, event.object, spec.what)) {
    return;  // its reconcile wrote it, as it now stands
  }
  std::vector<std::string> changed;
  std::vector<AnnotationProblem> fresh;
  {
    const std::lock_guard lock(index_mutex_);
    changed = IndexLocked(spec, event.object, deleted, fresh);
    metrics_.annotated.Set({"service"}, static_cast<double>(index_.service_count()));
    metrics_.annotated.Set({"target"}, static_cast<double>(index_.target_count()));
  }
  TellAnnotations(fresh);
  Enqueue(changed);
}

void Controller::WatchLoop(const WatchSpec& spec, const std::atomic<bool>* stop) {
  const auto stopped = [this, stop] { return stopping_.load() || (stop != nullptr && *stop); };
  kube::ListWatchOptions options;
  options.list = spec.list;
  options.server_timeout = config_.watch_timeout;
  kube::ListWatchHandlers handlers;
  // A page at a time: 5,000 Services are never all in memory at once.
  std::set<std::string> listed;
  handlers.on_list_page = [&](kube::Json& page) { ListedPage(spec, page, listed); };
  handlers.on_listed = [&](const std::string&) {
    Listed(spec, listed);
    listed.clear();
  };
  handlers.on_event = [&](const kube::WatchEvent& event) { Changed(spec, event); };
  handlers.on_retry = [&](const Error& error, milliseconds delay) {
    listed.clear();  // a list that failed half-way starts again from its first page
    log_(loop::LogLevel::kDebug, "watch " + spec.what + ": " + error.message() + "; again in " +
                                     std::to_string(delay.count()) + "ms");
  };
  milliseconds backoff = kWatchFirstBackoff;
  while (!stopped()) {
    auto ended = kube::ListWatch(client_, *spec.type, spec.ns, options, handlers, stopped, clock_);
    if (stopped()) {
      return;
    }
    // Only failures a retry cannot fix end ListWatch (403, 401, a bad answer); RBAC may be
    // put right while the controller runs: keep trying, and keep saying why.
    WarnRateLimited("watch " + spec.what,
                    "watch " + spec.what + ": " +
                        (ended ? std::string("ended") : ended.error().message()) + "; retrying");
    if (SleepUnlessStopped(backoff, stop)) {
      return;
    }
    backoff = std::min(backoff * 2, kWatchMaxBackoff);
  }
}

// --- work ---------------------------------------------------------------------------------

void Controller::FollowInjectedSecret(const std::string& secret, bool wanted) {
  const std::lock_guard lock(injected_watches_mutex_);
  auto watching = injected_watches_.find(secret);
  if (!wanted) {
    if (watching != injected_watches_.end()) {
      *watching->second.stop = true;
      {
        const std::lock_guard stop_lock(stop_mutex_);  // so that its back-off sleep sees it
      }
      stop_changed_.notify_all();
      client_.WakeWatches();
      ended_watches_.push_back(std::move(watching->second));
      injected_watches_.erase(watching);
      // Nothing keeps its copy up to date any more.
      const auto [ns, name] = SplitNamespacedKey(secret);
      copies_.Forget(kube::kSecrets, ns, name);
    }
    return;
  }
  if (watching != injected_watches_.end() || stopping_) {
    return;
  }
  if (injected_watches_.size() >= kMaxInjectedSecretWatches) {
    if (!told_watch_cap_) {
      told_watch_cap_ = true;
      log_(loop::LogLevel::kWarning,
           "more than " + std::to_string(kMaxInjectedSecretWatches) +
               " Secrets are only injected from; the others are read again when their targets "
               "change and at every --resync, so a change of their ca.crt may wait that long");
    }
    return;
  }
  const std::size_t slash = secret.find('/');
  WatchSpec spec{Source::kInjectedSecret,
                 &kube::kSecrets,
                 inject::TargetKind::kValidatingWebhookConfiguration,
                 secret.substr(0, slash),
                 {},
                 "secret " + secret};
  spec.list.field_selector = "metadata.name=" + secret.substr(slash + 1);
  InjectedSecretWatch watch{std::make_unique<std::atomic<bool>>(false), {}};
  const std::atomic<bool>* stop = watch.stop.get();
  watch.thread = std::thread([this, spec, stop] { WatchLoop(spec, stop); });
  injected_watches_.emplace(secret, std::move(watch));
}

void Controller::Enqueue(const std::vector<std::string>& secrets) {
  for (const std::string& secret : secrets) {
    queue_.Add(secret);
  }
  metrics_.queue.Set({"ready"}, static_cast<double>(queue_.Ready()));
}

std::vector<std::string> Controller::SecretsInLocked(const std::string& ns) const {
  std::vector<std::string> secrets = index_.Secrets();
  std::erase_if(secrets, [&](const std::string& secret) { return !secret.starts_with(ns + "/"); });
  return secrets;
}

bool Controller::SelectedOrTold(const std::string& secret, const SecretRequests& requests) {
  const std::string ns = secret.substr(0, secret.find('/'));
  bool selected = false;
  {
    const std::lock_guard lock(index_mutex_);
    selected = selected_namespaces_.contains(ns);
  }
  if (selected) {
    return true;
  }
  // A Service there is not acted on, as with --namespace; a target asking from there is told.
  std::vector<Problem> problems;
  for (const InjectionRequest& request : requests.injecting) {
    problems.push_back({TargetReference(request), "AnnotationInvalid",
                        controller::TargetObjectName(request.kind, request.name) + ": annotation " +
                            request.annotation + " names a Secret in " + ns +
                            ", a namespace that --namespace-selector " +
                            config_.namespace_selector + " does not select; it is ignored"});
  }
  TellProblems(secret, problems);
  return false;
}

void Controller::EnqueueAll() {
  std::vector<std::string> secrets;
  {
    const std::lock_guard lock(index_mutex_);
    secrets = index_.Secrets();
  }
  Enqueue(secrets);
}

void Controller::WorkerLoop() {
  while (auto secret = queue_.Get()) {
    if (election_.Leading()) {
      Work(*secret);
    }
    queue_.Done(*secret);
    metrics_.queue.Set({"ready"}, static_cast<double>(queue_.Ready()));
    metrics_.queue.Set({"waiting"}, static_cast<double>(queue_.Waiting()));
  }
}

void Controller::Work(const std::string& secret) {
  SecretRequests requests;
  {
    const std::lock_guard lock(index_mutex_);
    if (!index_whole_) {
      return;  // all of it comes once every watch has listed
    }
    requests = index_.RequestsFor(secret);
  }
  worked_since_idle_ = true;
  if (!requests.named()) {
    FollowInjectedSecret(secret, false);
    const std::lock_guard lock(told_mutex_);
    told_.erase(secret);
    return;
  }
  if (!config_.namespace_selector.empty() && !SelectedOrTold(secret, requests)) {
    FollowInjectedSecret(secret, false);
    return;
  }
  FollowInjectedSecret(secret, !requests.issuing);
  const auto [secret_ns, secret_name] = SplitNamespacedKey(secret);
  const std::string secret_object = controller::SecretObjectName(secret_ns, secret_name);
  loop::PassConfig hooks;
  hooks.hold_back = [this](const std::string& object, const controller::TargetObject& target) {
    const std::lock_guard lock(fights_mutex_);
    return fights_.HoldsBackTarget(object, target);
  };
  hooks.secret_hold_back = [this, secret_object](const kube::Json& stored) {
    const std::lock_guard lock(fights_mutex_);
    return fights_.HoldsBackSecret(secret_object, stored);
  };
  hooks.bundle_held_since = [this, secret](const std::string& bundle, bool written) {
    const std::lock_guard lock(fights_mutex_);
    return bundle_holds_[secret].Since(bundle, written, clock_.Now());
  };
  {
    const std::lock_guard lock(fights_mutex_);
    fights_.BeginPass(secret_object);
  }
  const MonotonicTime started = clock_.Monotonic();
  auto result = ReconcileSecret(client_, requests, config_.issue, clock_, hooks);
  const double took = std::chrono::duration<double>(clock_.Monotonic() - started).count();
  if (!result) {
    metrics_.reconciles.Add({"error"});
    metrics_.reconcile_duration.Observe({"error"}, took);
    const milliseconds delay = queue_.Retry(secret);
    WarnRateLimited("reconcile " + secret, "reconciling " + secret_object + ": " +
                                               result.error().message() + "; again in " +
                                               std::to_string(delay.count()) + "ms");
    return;
  }
  metrics_.reconciles.Add({"done"});
  metrics_.reconcile_duration.Observe({"done"}, took);
  Tell(*result);
  if (result->pass && result->pass->failure) {
    const milliseconds delay = queue_.Retry(secret);
    WarnRateLimited("reconcile " + secret, "reconciling " + secret_object + ": " +
                                               result->pass->failure->message() + "; again in " +
                                               std::to_string(delay.count()) + "ms");
    return;
  }
  queue_.Forget(secret);
  if (result->pass) {
    // A rotation's next step, the end of a wait, a repair held back: due without an event.
    std::optional<MonotonicTime> due;
    if (auto recheck = CloseFailurePolicies(requests, *result->pass); recheck) {
      due = clock_.Monotonic() + *recheck;
    }
    if (result->pass->next_step_at) {
      const MonotonicTime step =
          clock_.Monotonic() +
          std::chrono::ceil<milliseconds>(*result->pass->next_step_at - clock_.Now());
      due = due ? std::min(*due, step) : step;
    }
    if (!result->pass->held_back.empty()) {
      std::optional<MonotonicTime> release;
      {
        const std::lock_guard lock(fights_mutex_);
        release = fights_.NextRelease();
      }
      if (release && (!due || *release < *due)) {
        due = release;
      }
    }
    if (due) {
      queue_.AddAfter(secret, std::max(milliseconds(1),
                                       std::chrono::ceil<milliseconds>(*due - clock_.Monotonic())));
    }
  }
}

void Controller::Tell(const SecretReconcile& result) {
  const auto [ns, name] = SplitNamespacedKey(result.secret);
  const std::string secret_object = controller::SecretObjectName(ns, name);
  TellProblems(result.secret, result.problems);
  if (result.pass) {
    const loop::PassReport& pass = *result.pass;
    for (const loop::SecretChange& change : pass.secret_changes) {
      metrics_.writes.Add({"secret"});
      log_(loop::LogLevel::kInfo, std::string(controller::SecretActionName(change.action)) + ": " +
                                      secret_object +
                                      (change.reason.empty() ? "" : " (" + change.reason + ")"));
    }
    for (const std::string& object : pass.patched) {
      metrics_.writes.Add({object.substr(0, object.find('/'))});
      log_(loop::LogLevel::kInfo, "injected the CA bundle of " + secret_object + " into " + object);
    }
    {
      const std::lock_guard lock(fights_mutex_);
      fights_.NoteRepairs(pass, ns, name);
    }
    for (kube::Json& event : loop::WriteEvents(pass, ns, name, config_.instance, clock_)) {
      events_.Record(std::move(event));
    }
    if (pass.call_findings) {
      TellCallFindings(result.secret, *pass.call_findings, pass.targets);
    }
    if (pass.conflict) {
      WarnRateLimited("conflict " + result.secret,
                      "conflicting-configuration: " + pass.conflict->Describe(secret_object));
    }
    if (!pass.not_ready.empty()) {
      log_(loop::LogLevel::kDebug, secret_object + ": " + pass.not_ready);
    }
  }
  if (result.injected) {
    for (std::size_t i = 0; i < result.injected->patched.size(); ++i) {
      const std::string& object = result.injected->patched[i];
      metrics_.writes.Add({object.substr(0, object.find('/'))});
      log_(loop::LogLevel::kInfo, "injected the CA bundle of " + secret_object + " into " + object);
      events_.Record(loop::MakeEvent(result.injected->patched_references[i], "CABundleInjected",
                                     "injected the CA bundle of " + secret_object, config_.instance,
                                     clock_.Now()));
    }
  }
}

void Controller::TellProblems(const std::string& secret, const std::vector<Problem>& problems) {
  std::vector<const Problem*> fresh;
  {
    const std::lock_guard lock(told_mutex_);
    std::set<std::string>& told = told_[secret];
    std::set<std::string> now;
    for (const Problem& problem : problems) {
      const std::string key = "problem " + problem.reason + " " + problem.about.kind + "/" +
                              problem.about.name + ": " + problem.message;
      now.insert(key);
      if (!told.contains(key)) {
        fresh.push_back(&problem);
      }
    }
    // Findings stay as the last pass left them; problems that cleared are forgotten, so that
    // one coming back is told again.
    for (auto it = told.begin(); it != told.end();) {
      it = it->starts_with("problem ") && !now.contains(*it) ? told.erase(it) : std::next(it);
    }
    told.insert(now.begin(), now.end());
  }
  for (const Problem* problem : fresh) {
    metrics_.problems.Add({problem->reason});
    log_(loop::LogLevel::kWarning, problem->about.kind + " " +
                                       (problem->about.ns.empty() ? "" : problem->about.ns + "/") +
                                       problem->about.name + ": " + problem->message);
    events_.Record(loop::MakeEvent(problem->about, problem->reason, problem->message,
                                   config_.instance, clock_.Now(), loop::EventType::kWarning));
  }
}

void Controller::TellCallFindings(const std::string& secret, const std::vector<Finding>& findings,
                                  const std::vector<controller::TargetObject>& targets) {
  std::map<std::pair<std::string, std::string>, int> counts;
  std::vector<const Finding*> fresh;
  std::set<std::string> labels_before;
  {
    const std::lock_guard lock(told_mutex_);
    std::set<std::string>& told = told_[secret];
    std::set<std::string> now;
    for (const Finding& finding : findings) {
      const std::string key = "finding " + finding.object + ": " + finding.message;
      now.insert(key);
      if (!told.contains(key)) {
        fresh.push_back(&finding);
      }
      ++counts[{finding.object, std::string(FindingCodeName(finding.code))}];
    }
    for (auto it = told.begin(); it != told.end();) {
      it = it->starts_with("finding ") && !now.contains(*it) ? told.erase(it) : std::next(it);
    }
    told.insert(now.begin(), now.end());
    labels_before = std::exchange(finding_targets_[secret], {});
    for (const auto& [label, count] : counts) {
      finding_targets_[secret].insert(label.first + "\n" + label.second);
    }
  }
  for (const std::string& label : labels_before) {
    const std::size_t split = label.find('\n');
    metrics_.call_findings.Set({label.substr(0, split), label.substr(split + 1)}, 0);
  }
  for (const auto& [label, count] : counts) {
    metrics_.call_findings.Set({label.first, label.second}, count);
  }
  for (const Finding* finding : fresh) {
    log_(loop::LogLevel::kWarning,
         "the API server cannot call " + finding->object + ": " + finding->message);
    // The Event goes on the target the finding is about.
    const std::string target_name = finding->object.substr(0, finding->object.find(' '));
    for (const controller::TargetObject& target : targets) {
      if (controller::TargetObjectName(target.kind, target.name) == target_name) {
        events_.Record(loop::MakeEvent(
            controller::ReferenceOf(target),
            finding->code == FindingCode::kTargetNameNotCovered ? "TargetNameNotCovered"
                                                                : "TargetInvalid",
            finding->message, config_.instance, clock_.Now(), loop::EventType::kWarning));
        break;
      }
    }
  }
}

std::optional<milliseconds> Controller::CloseFailurePolicies(const SecretRequests& requests,
                                                             const loop::PassReport& pass) {
  if (!pass.ready || !pass.injected) {
    return std::nullopt;
  }
  std::set<std::string> uncallable;
  for (const Finding& finding : pass.call_findings.value_or(std::vector<Finding>())) {
    uncallable.insert(finding.object.substr(0, finding.object.find(' ')));
  }
  std::vector<controller::TargetObject> closing;
  for (const controller::TargetObject& target : pass.targets) {
    const std::string object = controller::TargetObjectName(target.kind, target.name);
    const bool asks = std::any_of(
        requests.injecting.begin(), requests.injecting.end(), [&](const InjectionRequest& r) {
          return r.fail_once_ready && controller::TargetObjectName(r.kind, r.name) == object;
        });
    if (asks && !uncallable.contains(object)) {
      closing.push_back(target);
    }
  }
  if (closing.empty()) {
    return std::nullopt;
  }
  loop::Fights::Closing closed;
  {
    const std::lock_guard lock(fights_mutex_);
    closed = fights_.CloseFailurePolicies(
        client_, closing,
        controller::SecretObjectName(requests.secret.substr(0, requests.secret.find('/')),
                                     requests.secret.substr(requests.secret.find('/') + 1)));
  }
  for (const std::string& object : closed.patched) {
    metrics_.writes.Add({object.substr(0, object.find('/'))});
  }
  if (!closed.failure.empty()) {
    WarnRateLimited("failure-policy " + requests.secret, closed.failure);
  }
  std::optional<milliseconds> recheck;
  {
    const std::lock_guard lock(told_mutex_);
    if (closed.kept_because.empty()) {
      kept_.erase(requests.secret);
    } else {
      auto& [because, wait] = kept_[requests.secret];
      wait = because == closed.kept_because
                 ? std::min(std::max(wait * 2, kKeptFirstRecheck), kKeptMaxRecheck)
                 : kKeptFirstRecheck;
      because = closed.kept_because;
      recheck = wait;
    }
  }
  if (!closed.kept_because.empty()) {
    WarnRateLimited("failure-policy-kept " + requests.secret, closed.kept_because);
  }
  if (closed.held_back) {
    const std::lock_guard lock(fights_mutex_);
    if (auto release = fights_.NextRelease(); release) {
      const milliseconds until = std::chrono::ceil<milliseconds>(*release - clock_.Monotonic());
      recheck = recheck ? std::min(*recheck, until) : until;
    }
  }
  return recheck;
}

// --- election and the main loop -------------------------------------------------------------

void Controller::BecameLeader() {
  std::vector<AnnotationProblem> standing;
  {
    const std::lock_guard lock(index_mutex_);
    for (const auto& [key, problem] : annotation_told_) {
      standing.push_back(problem);
    }
  }
  for (const AnnotationProblem& problem : standing) {
    RecordAnnotationEvent(problem);
  }
  EnqueueAll();  // the index is whole (every replica watches): everything, once
}

void Controller::Run() {
  const std::vector<WatchSpec> watches = Watches();
  {
    const std::lock_guard lock(index_mutex_);
    watches_ = watches.size();
    for (const WatchSpec& spec : watches) {
      unlisted_.insert(spec.what);
    }
  }
  for (const WatchSpec& spec : watches) {
    threads_.emplace_back([this, spec] { WatchLoop(spec); });
  }
  if (election_.Enabled()) {
    election_.Attempt();
    threads_.emplace_back(
        [this] { election_.Loop([this](milliseconds wait) { return SleepUnlessStopped(wait); }); });
  }
  for (int i = 0; i < std::max(1, config_.workers); ++i) {
    threads_.emplace_back([this] { WorkerLoop(); });
  }
  TimePoint next_resync = clock_.Now() + config_.resync;
  while (!stopping_) {
    heartbeat_ = Millis(clock_.Monotonic());
    milliseconds wait = kHeartbeat;
    wait = std::min(wait, std::chrono::ceil<milliseconds>(next_resync - clock_.Now()));
    if (auto due = events_.NextDue(); due) {
      wait = std::min(wait, std::chrono::ceil<milliseconds>(*due - clock_.Monotonic()));
    }
    if (SleepUnlessStopped(std::max(wait, milliseconds(0)))) {
      break;
    }
    events_.RecordDue();
    if (config_.on_idle && queue_.Ready() == 0 && worked_since_idle_.exchange(false)) {
      config_.on_idle();
    }
    if (clock_.Now() >= next_resync) {
      next_resync = clock_.Now() + config_.resync;
      EnqueueAll();
    }
  }
  Stop();
  for (std::thread& thread : threads_) {
    thread.join();
  }
  threads_.clear();
  const std::lock_guard lock(injected_watches_mutex_);
  for (auto& [secret, watch] : injected_watches_) {
    ended_watches_.push_back(std::move(watch));
  }
  injected_watches_.clear();
  for (InjectedSecretWatch& watch : ended_watches_) {
    watch.thread.join();
  }
  ended_watches_.clear();
}

}  // namespace certctl::fleet
