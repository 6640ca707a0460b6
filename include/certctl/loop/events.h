#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "certctl/controller/inject.h"
#include "certctl/kube/client.h"
#include "certctl/loop/event_series.h"
#include "certctl/loop/pass.h"
#include "certctl/util/clock.h"
#include "certctl/util/result.h"

namespace certctl::loop {

// Where events about cluster-scoped objects live: the API server takes them nowhere else.
inline constexpr char kClusterEventsNamespace[] = "default";

// Normal: what certctl did; Warning: what stops the webhook from working.
enum class EventType { kNormal, kWarning };

// A core/v1 Event of `type` about `about`, in the object's namespace (or
// kClusterEventsNamespace for a cluster-scoped one), where `kubectl describe` finds it by
// involvedObject. Named "<object>.<nanoseconds in hex>" as client-go names events, so a
// retried create meets AlreadyExists instead of recording the event twice.
kube::Json MakeEvent(const controller::ObjectReference& about, std::string_view reason,
                     std::string_view message, const std::string& instance, TimePoint now,
                     EventType type = EventType::kNormal);

// Creates the event. Events are for people reading `kubectl describe`: a failure is
// returned for the log, never for the reconcile.
Status RecordEvent(kube::Client& client, const kube::Json& event);

// The Events that tell what a leader's pass wrote: one about the Secret `ns`/`name` per write
// to it (Created, LeafReissued, the rotation's steps...), one CABundleInjected per target
// patched. For an EventSeries to fold, as every Event certctl records. Each reads the clock
// itself: an Event is named after its object and time, and a validating and a mutating
// configuration often share a name.
std::vector<kube::Json> WriteEvents(const PassReport& report, const std::string& ns,
                                    const std::string& name, const std::string& instance,
                                    const Clock& clock);

// Writes what an EventSeries decided: creates the Event, or patches its count, message and
// lastTimestamp. An Event gone meanwhile (deleted, or past the API server's time to live), or
// one the role may not patch, is created again under a new name, which `recreated` is told
// (for the series' EventSeries::Recreated). Failures as RecordEvent's; a refused patch is
// returned too, after the new Event.
Status WriteSeriesEvent(kube::Client& client, const EventSeries::Write& write, TimePoint now,
                        const std::function<void(const std::string& name)>& recreated);

// Records Events of a long-running command through one EventSeries, from any thread: repeats
// of one reason about one object fold into one Event per interval. A write that failed is
// handed to `failed` (the message) and nothing else happens: Events never stop the work.
class EventRecorder {
 public:
  // kInline writes each Event before Record returns (the sidecar's one loop). kBackground
  // queues it for a thread of the recorder's own, as client-go's event broadcaster does:
  // workers never wait for an Event, and at a start that injects 1,000 targets the
  // patches go first.
  enum class Delivery { kInline, kBackground };
  // At most this many Events wait for the background thread; more are dropped, and told.
  static constexpr std::size_t kMaxQueued = 4096;
  // When the recorder ends, what is still queued is written for at most this long.
  static constexpr std::chrono::seconds kDrainBound{5};

  EventRecorder(kube::Client& client, const Clock& clock,
                std::function<void(const std::string&)> failed,
                Delivery delivery = Delivery::kInline);
  ~EventRecorder();
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  void Record(kube::Json event);
  // The held repeats whose interval ended.
  void RecordDue();
  std::optional<MonotonicTime> NextDue() const;
  // Forgets every series, and the queued Events (the replica stopped leading: the new leader
  // tells its own).
  void Clear();

 private:
  void Deliver(EventSeries::Write write);
  void Write(const EventSeries::Write& write);
  void WriterLoop();

  kube::Client& client_;
  const Clock& clock_;
  std::function<void(const std::string&)> failed_;
  mutable std::mutex mutex_;
  EventSeries series_;
  const Delivery delivery_;
  std::condition_variable queued_changed_;  // with mutex_
  std::deque<EventSeries::Write> queued_;
  bool ending_ = false;
  std::size_t dropped_ = 0;  // since the last told
  std::thread writer_;
};

}  // namespace certctl::loop
