#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "certctl/kube/client.h"
#include "certctl/util/clock.h"
#include "certctl/util/result.h"

namespace certctl::kube {

struct ListWatchOptions {
  ListOptions list;                          // selectors apply to the watch as well
  std::chrono::seconds server_timeout{300};  // each watch asks for this to twice this
  std::chrono::milliseconds initial_backoff{500};
  std::chrono::milliseconds max_backoff{30000};
};

struct ListWatchHandlers {
  // The complete state after every (re)list; it replaces whatever the caller knew.
  std::function<void(const std::vector<Json>& items, const std::string& resource_version)> on_list;
  // Instead of on_list, for a caller that keeps little of a long list: each page of a (re)list
  // as it comes (never all of it at once), then on_listed once the list is whole. A list that
  // fails half-way is listed again from its first page.
  std::function<void(Json& page)> on_list_page;
  std::function<void(const std::string& resource_version)> on_listed;
  // ADDED, MODIFIED and DELETED events (bookmarks only move the resume point).
  std::function<void(const WatchEvent& event)> on_event;
  // A watch ended and is resumed from `resource_version` (empty: a re-list follows).
  std::function<void(const std::string& resource_version)> on_resume;
  // A request failed and will be retried after `delay`.
  std::function<void(const Error& error, std::chrono::milliseconds delay)> on_retry;
};

// Lists, then watches from the list's resourceVersion; after a dropped or timed-out stream it
// resumes from the last resourceVersion seen (bookmarks included), and after 410 Gone it
// lists again. Transient failures (kUnavailable, kDeadlineExceeded) are retried with capped
// exponential backoff and jitter, honouring Retry-After. Returns Ok once `cancelled` is true,
// or the first error that a retry cannot fix (forbidden, unauthenticated, invalid).
Status ListWatch(Client& client, const ResourceType& type, std::string_view ns,
                 const ListWatchOptions& options, const ListWatchHandlers& handlers,
                 const std::function<bool()>& cancelled, const Clock& clock);

}  // namespace certctl::kube
