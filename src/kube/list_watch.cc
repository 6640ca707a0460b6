#include "certctl/kube/list_watch.h"

#include <algorithm>
#include <optional>
#include <random>

#include "certctl/kube/object.h"

namespace certctl::kube {
namespace {

bool Retryable(const Error& error) {
  return error.code() == ErrorCode::kUnavailable || error.code() == ErrorCode::kDeadlineExceeded;
}

// Exponential backoff with up to 50% jitter, so many replicas do not retry in lockstep.
class Backoff {
 public:
  explicit Backoff(const ListWatchOptions& options)
      : initial_(options.initial_backoff), max_(options.max_backoff), next_(initial_) {}

  std::chrono::milliseconds Next(const Error& error) {
    std::chrono::milliseconds delay = next_;
    next_ = std::min(max_, next_ * 2);
    std::uniform_int_distribution<long> jitter(0, delay.count() / 2);
    delay += std::chrono::milliseconds(jitter(random_));
    if (error.retry_after()) {
      delay = std::max<std::chrono::milliseconds>(delay, *error.retry_after());
    }
    return delay;
  }
  void Reset() { next_ = initial_; }

 private:
  std::chrono::milliseconds initial_;
  std::chrono::milliseconds max_;
  std::chrono::milliseconds next_;
  std::minstd_rand random_{std::random_device{}()};
};

// Each watch asks for between `minimum` and twice that, as client-go's reflectors do, so the
// watches of one process (and of many replicas) do not all end and resume in the same second.
std::chrono::seconds WatchTimeout(std::chrono::seconds minimum) {
  thread_local std::minstd_rand random{std::random_device{}()};
  std::uniform_int_distribution<long> extra(0, std::max<long>(0, minimum.count() - 1));
  return minimum + std::chrono::seconds(extra(random));
}

// Sleeps in short slices so cancellation is noticed within a tenth of a second.
void SleepUnlessCancelled(std::chrono::milliseconds delay, const std::function<bool()>& cancelled,
                          const Clock& clock) {
  constexpr std::chrono::milliseconds kSlice{100};
  while (delay.count() > 0 && !cancelled()) {
    const auto step = std::min(delay, kSlice);
    clock.Sleep(step);
    delay -= step;
  }
}

}  // namespace

Status ListWatch(Client& client, const ResourceType& type, std::string_view ns,
                 const ListWatchOptions& options, const ListWatchHandlers& handlers,
                 const std::function<bool()>& cancelled, const Clock& clock) {
  Backoff backoff(options);
  std::string resource_version;  // empty: (re)list first
  while (!cancelled()) {
    if (resource_version.empty() && handlers.on_list_page) {
      auto listed = client.ListPagesAt(type, ns, options.list, [&](Json& page) -> Status {
        handlers.on_list_page(page);
        return {};
      });
      if (!listed) {
        if (!Retryable(listed.error())) {
          return Fail(listed.error());
        }
        const auto delay = backoff.Next(listed.error());
        if (handlers.on_retry) handlers.on_retry(listed.error(), delay);
        SleepUnlessCancelled(delay, cancelled, clock);
        continue;
      }
      if (listed->empty()) {
        return Fail(ErrorCode::kBadResponse,
                    "list " + std::string(type.resource) + ": the answer has no resourceVersion");
      }
      resource_version = std::move(*listed);
      if (handlers.on_listed) handlers.on_listed(resource_version);
    } else if (resource_version.empty()) {
      auto list = client.List(type, ns, options.list);
      if (!list) {
        if (!Retryable(list.error())) {
          return Fail(list.error());
        }
        const auto delay = backoff.Next(list.error());
        if (handlers.on_retry) handlers.on_retry(list.error(), delay);
        SleepUnlessCancelled(delay, cancelled, clock);
        continue;
      }
      auto listed_version = ResourceVersion(*list, "list " + std::string(type.resource));
      if (!listed_version) {
        return Fail(listed_version.error());
      }
      resource_version = std::move(*listed_version);
      std::vector<Json> items = (*list)["items"].get<std::vector<Json>>();
      if (handlers.on_list) handlers.on_list(items, resource_version);
    }

    WatchOptions watch;
    watch.resource_version = resource_version;
    watch.label_selector = options.list.label_selector;
    watch.field_selector = options.list.field_selector;
    watch.server_timeout = WatchTimeout(options.server_timeout);
    bool progressed = false;
    std::optional<Error> bad_event;
    const auto watch_started = clock.Monotonic();
    const Status watched = client.Watch(
        type, ns, watch,
        [&](const WatchEvent& event) {
          progressed = true;
          auto version = ResourceVersion(event.object, "watch " + std::string(type.resource));
          if (!version) {
            bad_event = version.error();
            return false;
          }
          if (!version->empty()) {
            resource_version = std::move(*version);
          }
          if (event.type != WatchEventType::kBookmark && handlers.on_event) {
            handlers.on_event(event);
          }
          return !cancelled();
        },
        cancelled);
    if (cancelled()) {
      break;
    }
    if (bad_event) {
      return Fail(*bad_event);
    }
    if (progressed) {
      backoff.Reset();
    }
    if (watched) {
      // The server ended the stream (timeout, restart, dropped connection): resume, after a
      // pause if it brought nothing, so a peer that keeps closing cannot make us spin. A
      // stream that ended empty well before the timeout it was given was cut, not finished:
      // the caller hears of it as a failure (the sidecar polls while a watch is failing).
      if (handlers.on_resume) handlers.on_resume(resource_version);
      if (!progressed) {
        const bool cut = clock.Monotonic() - watch_started < watch.server_timeout * 9 / 10;
        const Error empty(ErrorCode::kUnavailable,
                          cut ? "the watch was closed before its timeout without an event"
                              : "the watch timed out without an event");
        const auto delay = backoff.Next(empty);
        if (cut && handlers.on_retry) handlers.on_retry(empty, delay);
        SleepUnlessCancelled(delay, cancelled, clock);
      }
      continue;
    }
    if (watched.error().code() == ErrorCode::kExpired) {
      resource_version.clear();
      if (handlers.on_resume) handlers.on_resume(resource_version);
      continue;
    }
    if (!Retryable(watched.error())) {
      return watched;
    }
    const auto delay = backoff.Next(watched.error());
    if (handlers.on_retry) handlers.on_retry(watched.error(), delay);
    SleepUnlessCancelled(delay, cancelled, clock);
  }
  return {};
}

}  // namespace certctl::kube
