#include "certctl/loop/events.h"

#include <cstdio>
#include <utility>

#include "certctl/controller/secret.h"
#include "certctl/util/duration.h"

namespace certctl::loop {

namespace {

// "<object>.<nanoseconds in hex>".
std::string EventName(const std::string& about, TimePoint now) {
  const auto nanoseconds =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), ".%llx", static_cast<unsigned long long>(nanoseconds));
  return about + suffix;
}

}  // namespace

kube::Json MakeEvent(const controller::ObjectReference& about, std::string_view reason,
                     std::string_view message, const std::string& instance, TimePoint now,
                     EventType type) {
  const std::string ns = about.ns.empty() ? kClusterEventsNamespace : about.ns;
  kube::Json involved = {
      {"apiVersion", about.api_version}, {"kind", about.kind}, {"name", about.name}};
  if (!about.ns.empty()) {
    involved["namespace"] = about.ns;
  }
  if (!about.uid.empty()) {
    involved["uid"] = about.uid;
  }
  const std::string timestamp = FormatRfc3339(now);
  return {{"apiVersion", "v1"},
          {"kind", "Event"},
          {"metadata", {{"name", EventName(about.name, now)}, {"namespace", ns}}},
          {"involvedObject", std::move(involved)},
          {"reason", reason},
          {"message", message},
          {"type", type == EventType::kWarning ? "Warning" : "Normal"},
          {"source", {{"component", "certctl"}}},
          {"reportingComponent", "certctl"},
          {"reportingInstance", instance},
          {"firstTimestamp", timestamp},
          {"lastTimestamp", timestamp},
          {"count", 1}};
}

Status RecordEvent(kube::Client& client, const kube::Json& event) {
  const std::string ns = event["metadata"]["namespace"];
  auto created = client.Create(kube::kEvents, ns, event);
  if (!created && created.error().code() != ErrorCode::kAlreadyExists) {
    return Fail(created.error().Wrap("record event " + event["reason"].get<std::string>()));
  }
  return {};
}

Status WriteSeriesEvent(kube::Client& client, const EventSeries::Write& write, TimePoint now,
                        const std::function<void(const std::string& name)>& recreated) {
  if (write.name.empty()) {
    return RecordEvent(client, write.event);
  }
  auto patched =
      client.Patch(kube::kEvents, write.ns, write.name, kube::PatchType::kMerge, write.patch);
  if (patched) {
    return {};
  }
  const std::string counting = "count event " + write.event["reason"].get<std::string>();
  // A role that grants only create on events (the least the series needs to be told at
  // all) gets a new Event, with the count so far, where it refuses the patch; the refusal
  // still goes to the log, so the missing grant is seen.
  const ErrorCode code = patched.error().code();
  if (code != ErrorCode::kNotFound && code != ErrorCode::kPermissionDenied) {
    return Fail(patched.error().Wrap(counting));
  }
  kube::Json again = write.event;
  again["metadata"]["name"] = EventName(again["involvedObject"]["name"].get<std::string>(), now);
  if (auto recorded = RecordEvent(client, again); !recorded) {
    return recorded;
  }
  recreated(again["metadata"]["name"].get<std::string>());
  if (code == ErrorCode::kPermissionDenied) {
    return Fail(patched.error().Wrap(counting + " (told as a new Event instead)"));
  }
  return {};
}

std::vector<kube::Json> WriteEvents(const PassReport& report, const std::string& ns,
                                    const std::string& name, const std::string& instance,
                                    const Clock& clock) {
  const std::string secret_object = controller::SecretObjectName(ns, name);
  std::vector<kube::Json> events;
  for (const SecretChange& change : report.secret_changes) {
    const controller::ObjectReference secret_reference{"v1", "Secret", ns, name, change.uid};
    const std::string why = change.reason.empty() ? "" : ": " + change.reason;
    const auto about_secret = [&](std::string_view reason, const std::string& message) {
      events.push_back(MakeEvent(secret_reference, reason, message, instance, clock.Now()));
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
      case controller::SecretAction::kRepaired:
        about_secret("Repaired", "removed what did not belong" + why);
        break;
    }
  }
  for (const controller::ObjectReference& target : report.patched_references) {
    events.push_back(MakeEvent(target, "CABundleInjected",
                               "injected the CA bundle of " + secret_object, instance,
                               clock.Now()));
  }
  return events;
}

EventRecorder::EventRecorder(kube::Client& client, const Clock& clock,
                             std::function<void(const std::string&)> failed, Delivery delivery)
    : client_(client), clock_(clock), failed_(std::move(failed)), delivery_(delivery) {
  if (delivery_ == Delivery::kBackground) {
    writer_ = std::thread([this] { WriterLoop(); });
  }
}

EventRecorder::~EventRecorder() {
  if (writer_.joinable()) {
    {
      const std::lock_guard lock(mutex_);
      ending_ = true;
    }
    queued_changed_.notify_all();
    writer_.join();
  }
}

void EventRecorder::Record(kube::Json event) {
  std::optional<EventSeries::Write> write;
  {
    const std::lock_guard lock(mutex_);
    write = series_.Admit(std::move(event), clock_.Monotonic());
  }
  if (write) {
    Deliver(std::move(*write));
  }
}

void EventRecorder::RecordDue() {
  std::vector<EventSeries::Write> due;
  {
    const std::lock_guard lock(mutex_);
    due = series_.Due(clock_.Monotonic());
  }
  for (EventSeries::Write& write : due) {
    Deliver(std::move(write));
  }
}

void EventRecorder::Deliver(EventSeries::Write write) {
  if (delivery_ == Delivery::kInline) {
    Write(write);
    return;
  }
  {
    const std::lock_guard lock(mutex_);
    if (queued_.size() >= kMaxQueued) {
      ++dropped_;
      return;
    }
    queued_.push_back(std::move(write));
  }
  queued_changed_.notify_one();
}

void EventRecorder::WriterLoop() {
  std::optional<MonotonicTime> drain_until;
  std::unique_lock lock(mutex_);
  while (true) {
    queued_changed_.wait(lock, [this] { return ending_ || !queued_.empty() || dropped_ > 0; });
    if (dropped_ > 0) {
      const std::size_t dropped = std::exchange(dropped_, 0);
      lock.unlock();
      failed_(std::to_string(dropped) + " Events dropped: more than " + std::to_string(kMaxQueued) +
              " were waiting to be written");
      lock.lock();
      continue;
    }
    if (ending_ && !drain_until) {
      drain_until = clock_.Monotonic() + kDrainBound;
    }
    if (queued_.empty() || (drain_until && clock_.Monotonic() >= *drain_until)) {
      if (!queued_.empty()) {
        const std::size_t left = queued_.size();
        queued_.clear();
        lock.unlock();
        failed_(std::to_string(left) +
                " Events not written: the API server did not take them "
                "within " +
                std::to_string(kDrainBound.count()) + "s of the end");
        return;
      }
      if (ending_) {
        return;
      }
      continue;
    }
    EventSeries::Write write = std::move(queued_.front());
    queued_.pop_front();
    lock.unlock();
    Write(write);
    lock.lock();
  }
}

void EventRecorder::Write(const EventSeries::Write& write) {
  // Sent without the lock: workers recording Events at once wait for none but their own.
  auto written = WriteSeriesEvent(client_, write, clock_.Now(), [&](const std::string& name) {
    const std::lock_guard lock(mutex_);
    series_.Recreated(write.key, name);
  });
  if (!written) {
    failed_(written.error().message());
  }
}

std::optional<MonotonicTime> EventRecorder::NextDue() const {
  const std::lock_guard lock(mutex_);
  return series_.NextDue();
}

void EventRecorder::Clear() {
  const std::lock_guard lock(mutex_);
  series_.Clear();
  queued_.clear();
}

}  // namespace certctl::loop
