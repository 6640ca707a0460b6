#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "certctl/fleet/annotation_index.h"
#include "certctl/fleet/object_copies.h"
#include "certctl/fleet/reconcile.h"
#include "certctl/fleet/work_queue.h"
#include "certctl/kube/client.h"
#include "certctl/leader/elector.h"
#include "certctl/loop/election.h"
#include "certctl/loop/events.h"
#include "certctl/loop/fights.h"
#include "certctl/loop/log.h"
#include "certctl/metrics/registry.h"
#include "certctl/util/clock.h"

namespace certctl::fleet {

struct ControllerConfig {
  IssueSettings issue;
  std::vector<std::string> namespaces;  // the namespaces watched; empty: every one
  // Or the namespaces whose labels match this selector, as they come and go (a watch of
  // Namespaces); exclusive with `namespaces`.
  std::string namespace_selector;
  bool cert_manager_annotations = false;
  int workers = 4;
  std::chrono::seconds resync{3600};               // every named Secret at least this often
  std::chrono::seconds watch_timeout{300};         // each watch request (timeoutSeconds)
  std::optional<leader::ElectionConfig> election;  // none: this replica always works
  std::string instance = "certctl-controller";     // as Events name their reporter
  // Called from the main loop once the queue has drained after work (the composition root
  // hands memory back to the system there: a first pass over 1,000 Secrets leaves the
  // allocator holding several MiB nothing uses any more).
  std::function<void()> on_idle;
};

// The series `controller` exposes on /metrics.
struct ControllerMetrics {
  explicit ControllerMetrics(metrics::Registry& registry);

  metrics::Family& reconciles;          // {result="done"|"error"}
  metrics::Family& reconcile_duration;  // {result}
  metrics::Family& writes;              // {kind}
  metrics::Family& secrets;             // Secrets the annotations name
  metrics::Family& annotated;           // {kind="service"|"target"}: annotated objects kept
  metrics::Family& queue;               // {state="ready"|"waiting"}
  metrics::Family& problems;            // {reason}: annotations that could not be honoured
  metrics::Family& call_findings;       // {target, code}
  metrics::Family& overwrites;          // {object, field}
  metrics::Family& leader;
  metrics::Family& ready;
  metrics::Family& api_requests;  // {method, code}
};

// `certctl controller`: one watch per kind (Services in the watched namespaces, the four
// target kinds, and the Secrets it issued, by their label), the annotated objects in an
// AnnotationIndex, and a WorkQueue of the Secrets whose Service or targets changed, worked on
// by `workers` threads through ReconcileSecret, with one Fights for every object. Only the
// leader works; every replica watches, so a new leader starts with its index filled. API
// failures never end it: a Secret that failed is retried with its own back-off, watches
// resume or re-list.
class Controller {
 public:
  Controller(kube::Client& client, const Clock& clock, ControllerConfig config,
             ControllerMetrics& metrics, loop::LogSink log);
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;
  ~Controller();

  // Runs until Stop; returns after every thread ended and the lease (if held) was released.
  void Run();
  // From any thread (a signal handler thread): ends Run.
  void Stop();
  // Readiness: every watch has listed once (the index is whole). Targets' findings never
  // make the controller unready: they are about one webhook, not about the controller.
  std::optional<std::string> NotReady() const;
  // Liveness: the main loop went round within the last minute.
  bool Alive() const;

 private:
  // kInjectedSecret: one Secret only injected from (not issued here), watched by name.
  enum class Source { kServices, kTargets, kIssuedSecrets, kNamespaces, kInjectedSecret };
  struct WatchSpec {
    Source source;
    const kube::ResourceType* type;
    inject::TargetKind kind;  // with kTargets
    std::string ns;           // empty: cluster-wide
    kube::ListOptions list;
    std::string what;  // "services in team-a", "validatingwebhookconfigurations"
  };

  // An annotation that cannot be honoured, and the object it is on.
  struct AnnotationProblem {
    controller::ObjectReference about;
    std::string message;
  };

  std::vector<WatchSpec> Watches() const;
  // Until Stop, or until `stop` (when given) is true.
  void WatchLoop(const WatchSpec& spec, const std::atomic<bool>* stop = nullptr);
  // The Secret `secret` ("ns/name") is only injected from (`wanted`) or no longer: its watch by
  // name is started, up to kMaxInjectedSecretWatches, or ended. Without it a change there would
  // wait for a target's change or the resync (a cert-manager renewal of a self-signed
  // certificate changes ca.crt).
  void FollowInjectedSecret(const std::string& secret, bool wanted);
  // A page of a (re)list: its objects go into the index, their keys into `listed`. Nothing of
  // an object without certctl's annotations is kept.
  void ListedPage(const WatchSpec& spec, const kube::Json& page, std::set<std::string>& listed);
  // The list is whole: what it did not list is forgotten.
  void Listed(const WatchSpec& spec, const std::set<std::string>& listed);
  void Changed(const WatchSpec& spec, const kube::WatchEvent& event);
  // Puts one Service or target into the index (or takes it out); returns the Secrets to
  // reconcile. Needs index_mutex_.
  std::vector<std::string> IndexLocked(const WatchSpec& spec, const kube::Json& object,
                                       bool deleted, std::vector<AnnotationProblem>& fresh);
  // Remembers `problem` of the object `key` (none: it has none now); a new one is put into
  // `fresh` for TellAnnotations once the lock is released. Needs index_mutex_.
  void NoteAnnotationLocked(const std::string& key, const controller::ObjectReference& about,
                            const std::optional<std::string>& problem,
                            std::vector<AnnotationProblem>& fresh);
  // Logs each and, on the leader, records its Warning Event (a new leader tells those still
  // standing).
  void TellAnnotations(const std::vector<AnnotationProblem>& problems);
  // Its Warning Event AnnotationInvalid, the same whether told now or by a new leader.
  void RecordAnnotationEvent(const AnnotationProblem& problem);
  // With a namespace selector: the Secrets the index names in `ns`, whose namespace was
  // selected or left. Needs index_mutex_.
  std::vector<std::string> SecretsInLocked(const std::string& ns) const;
  // With a namespace selector: whether the worker may reconcile `secret` ("ns/name"). In a
  // namespace the selector does not select, never: its targets are told so instead.
  bool SelectedOrTold(const std::string& secret, const SecretRequests& requests);
  void Enqueue(const std::vector<std::string>& secrets);
  void EnqueueAll();
  void WorkerLoop();
  void Work(const std::string& secret);
  void Tell(const SecretReconcile& result);
  void TellProblems(const std::string& secret, const std::vector<Problem>& problems);
  void TellCallFindings(const std::string& secret, const std::vector<Finding>& findings,
                        const std::vector<controller::TargetObject>& targets);
  // certctl.io/failure-policy-once-ready: Fail on the entries of the targets of `requests`
  // that ask for it, once the pass found them ready and callable. When it is due again
  // without an event (entries kept at Ignore, a repair held back): nullopt, not due.
  std::optional<std::chrono::milliseconds> CloseFailurePolicies(const SecretRequests& requests,
                                                                const loop::PassReport& pass);
  // The leader tells what followers only logged, and works on everything once.
  void BecameLeader();
  // True when stopped (or `stop`, when given, became true) before `duration` ended.
  bool SleepUnlessStopped(std::chrono::milliseconds duration,
                          const std::atomic<bool>* stop = nullptr);
  void WarnRateLimited(const std::string& key, const std::string& message);

  ObjectCopies copies_;  // every request goes through it
  kube::Client& client_;
  const Clock& clock_;
  const ControllerConfig config_;
  ControllerMetrics& metrics_;
  loop::LogSink log_;
  WorkQueue queue_;

  std::mutex stop_mutex_;
  std::condition_variable stop_changed_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> worked_since_idle_{false};

  loop::Election election_;

  mutable std::mutex index_mutex_;
  AnnotationIndex index_;
  std::map<std::string, AnnotationProblem> annotation_told_;  // by object key
  std::size_t watches_ = 0;
  std::set<std::string> unlisted_;  // watches that have not listed yet
  // Every watch has listed once: before that a Secret is not worked on, so that it is not
  // issued before its targets are known, nor a target told its Secret is missing before the
  // Services are.
  bool index_whole_ = false;
  std::set<std::string> selected_namespaces_;  // with a namespace selector: those it selects

  // What workers share, each under its own lock.
  std::mutex fights_mutex_;
  loop::Fights fights_;
  std::map<std::string, loop::BundleHold> bundle_holds_;  // by Secret, under fights_mutex_
  loop::EventRecorder events_;
  std::mutex told_mutex_;
  std::map<std::string, std::set<std::string>> told_;  // by Secret: problems, findings told
  std::map<std::string, std::set<std::string>> finding_targets_;  // by Secret: metric labels
  std::map<std::string, MonotonicTime> last_warning_;
  // By Secret: why entries keep Ignore, and the wait before they are judged again (doubling
  // while the reason stays the same), under told_mutex_.
  std::map<std::string, std::pair<std::string, std::chrono::milliseconds>> kept_;

  std::atomic<std::int64_t> heartbeat_{0};
  std::vector<std::thread> threads_;
  struct InjectedSecretWatch {
    std::unique_ptr<std::atomic<bool>> stop;
    std::thread thread;
  };
  std::mutex injected_watches_mutex_;
  std::map<std::string, InjectedSecretWatch> injected_watches_;  // by Secret
  std::vector<InjectedSecretWatch> ended_watches_;               // joined when Run ends
  bool told_watch_cap_ = false;                                  // under injected_watches_mutex_
};

}  // namespace certctl::fleet
