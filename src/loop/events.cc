#include "certctl/loop/events.h"

#include <cstdio>

#include "certctl/util/duration.h"

namespace certctl::loop {

kube::Json MakeEvent(const controller::ObjectReference& about, std::string_view reason,
                     std::string_view message, const std::string& instance, TimePoint now,
                     EventType type) {
  const std::string ns = about.ns.empty() ? kClusterEventsNamespace : about.ns;
  const auto nanoseconds =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), ".%llx", static_cast<unsigned long long>(nanoseconds));
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
          {"metadata", {{"name", about.name + suffix}, {"namespace", ns}}},
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

}  // namespace certctl::loop
