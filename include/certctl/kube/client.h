#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "certctl/kube/config.h"
#include "certctl/kube/transport.h"
#include "certctl/util/clock.h"
#include "certctl/util/result.h"

namespace certctl::kube {

using Json = nlohmann::json;

// A resource type as the REST paths name it.
struct ResourceType {
  std::string_view group;     // "" for core
  std::string_view version;   // "v1"
  std::string_view resource;  // plural: "secrets"
  std::string_view kind;      // "Secret"
  bool namespaced;
};

inline constexpr ResourceType kSecrets{"", "v1", "secrets", "Secret", true};
inline constexpr ResourceType kServices{"", "v1", "services", "Service", true};
inline constexpr ResourceType kNamespaces{"", "v1", "namespaces", "Namespace", false};
inline constexpr ResourceType kEndpointSlices{"discovery.k8s.io", "v1", "endpointslices",
                                              "EndpointSlice", true};
inline constexpr ResourceType kEvents{"", "v1", "events", "Event", true};
inline constexpr ResourceType kLeases{"coordination.k8s.io", "v1", "leases", "Lease", true};
inline constexpr ResourceType kValidatingWebhookConfigurations{
    "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration", false};
inline constexpr ResourceType kMutatingWebhookConfigurations{"admissionregistration.k8s.io", "v1",
                                                             "mutatingwebhookconfigurations",
                                                             "MutatingWebhookConfiguration", false};
inline constexpr ResourceType kCustomResourceDefinitions{
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", false};
inline constexpr ResourceType kApiServices{"apiregistration.k8s.io", "v1", "apiservices",
                                           "APIService", false};

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int page_size = 100;  // limit per request; List follows continue tokens to the end
};

struct WatchOptions {
  std::string resource_version;  // start after this; empty: from now (the server picks)
  std::string label_selector;
  std::string field_selector;
  bool allow_bookmarks = true;
  std::chrono::seconds server_timeout{300};  // timeoutSeconds sent to the server
};

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };

struct WatchEvent {
  WatchEventType type;
  Json object;  // the object; for kError the metav1.Status
};

enum class PatchType { kMerge, kJsonPatch, kStrategicMerge };

// The narrow interface the rest of certctl sees. `ns` is ignored for cluster-scoped types.
// Failures carry the code the caller acts on (kConflict: re-read and re-apply;
// kUnavailable: back off, honouring retry_after(); kExpired: re-list; kNotFound;
// kAlreadyExists; kPermissionDenied; kUnauthenticated; kInvalidArgument; kBadResponse: the
// answer was unusable) and the API's own message, made printable and clipped.
//
// Answers are untrusted: an object returned by Get, Create, Update or Patch is the one asked
// for (metadata.name and namespace match the request, else kBadResponse), and URLs are built
// only from the names the caller passes, never from a response.
//
// Transient failures (transport errors, 5xx, 429) may be retried inside a call, so callers
// must be ready for the effects of a repeated request: reads; Create (a repeat of a create
// that reached the server answers kAlreadyExists); Update carrying metadata.resourceVersion (a
// repeat answers kConflict); Patch with a JSON patch that contains a `test` operation. Other
// writes are repeated only after a 429, which the server sends before doing anything.
class Client {
 public:
  virtual ~Client() = default;

  // Absent is a value, not an error.
  virtual Result<std::optional<Json>> Get(const ResourceType& type, std::string_view ns,
                                          std::string_view name) = 0;
  // The whole list: {"items": [...], "metadata": {"resourceVersion": "..."}}.
  virtual Result<Json> List(const ResourceType& type, std::string_view ns,
                            const ListOptions& options) = 0;
  // The same list a page at a time (at most options.page_size items each, an array), so a
  // caller that keeps little of a long list never holds all of it; an error `on_page`
  // returns ends the listing. Doubles that list at once may leave this as it is: one page.
  virtual Status ListPages(const ResourceType& type, std::string_view ns,
                           const ListOptions& options,
                           const std::function<Status(Json& items)>& on_page) {
    auto list = List(type, ns, options);
    if (!list) {
      return Fail(list.error());
    }
    return on_page((*list)["items"]);
  }
  // ListPages that returns the list's resourceVersion (the snapshot every page belongs to),
  // for a watch to start from. Doubles that list at once may leave this as it is.
  virtual Result<std::string> ListPagesAt(const ResourceType& type, std::string_view ns,
                                          const ListOptions& options,
                                          const std::function<Status(Json& items)>& on_page) {
    auto list = List(type, ns, options);
    if (!list) {
      return Fail(list.error());
    }
    const Json::json_pointer version("/metadata/resourceVersion");
    std::string resource_version = list->contains(version) && (*list)[version].is_string()
                                       ? (*list)[version].get<std::string>()
                                       : "";
    if (auto handled = on_page((*list)["items"]); !handled) {
      return Fail(handled.error());
    }
    return resource_version;
  }
  virtual Result<Json> Create(const ResourceType& type, std::string_view ns,
                              const Json& object) = 0;
  // Replaces object `name`; metadata.resourceVersion in `object` makes it conditional. The
  // object's metadata.name, when set, must be `name` (kInvalidArgument otherwise).
  virtual Result<Json> Update(const ResourceType& type, std::string_view ns, std::string_view name,
                              const Json& object) = 0;
  virtual Result<Json> Patch(const ResourceType& type, std::string_view ns, std::string_view name,
                             PatchType patch_type, const Json& patch) = 0;
  virtual Status Delete(const ResourceType& type, std::string_view ns, std::string_view name) = 0;

  // Delivers events until `on_event` returns false, the server closes the stream (Ok), or
  // `cancelled` turns true (Ok). An ERROR event with code 410 ends the watch as kExpired;
  // other ERROR events as their mapped code.
  virtual Status Watch(const ResourceType& type, std::string_view ns, const WatchOptions& options,
                       const std::function<bool(const WatchEvent&)>& on_event,
                       const std::function<bool()>& cancelled) = 0;

  // Makes every Watch in progress look at its `cancelled` now (HttpTransport::WakeStreams);
  // call it after making that true.
  virtual void WakeWatches() {}
};

// How a call rides out transient failures (see Client): capped exponential backoff with up to
// 50% jitter, or the server's Retry-After when it sends one, up to max_retry_after.
struct RetryOptions {
  int max_retries = 4;  // retries per call; -1: as many as the deadline allows
  std::chrono::milliseconds backoff_base{250};
  std::chrono::milliseconds backoff_cap{5000};
  std::chrono::seconds max_retry_after{10};
  // No retry starts and no wait lasts past this point of the client's Clock; none: no bound.
  std::optional<TimePoint> deadline;
  // Told, before each wait, what is retried, why and for how long (for the log).
  std::function<void(const std::string& message)> on_retry;
};

struct ClientOptions {
  double qps = 5.0;  // client-side token bucket, client-go's defaults
  int burst = 10;
  std::chrono::milliseconds request_timeout{30000};  // every non-watch request
  RetryOptions retry;
  std::string user_agent;  // default "certctl/<version>"
  // Sent as ?fieldManager= with every create, update and patch, so managedFields name the
  // fields certctl owns under one stable name (GitOps tools can ignore exactly those).
  std::string field_manager = "certctl";
  // Told about every HTTP exchange, retries included: the method and the status, or 0 when
  // no response came (for metrics). Called from the thread that made the request.
  std::function<void(const std::string& method, int status)> on_response;
};

// The client over HTTP. Sends JSON only (never protobuf), a bearer token re-read from
// token_file at most once a minute (and at once after a 401), and never logs credentials.
Result<std::unique_ptr<Client>> MakeRestClient(const ClusterConfig& config,
                                               std::unique_ptr<HttpTransport> transport,
                                               const ClientOptions& options, const Clock& clock);

// Maps an HTTP error response (metav1.Status JSON or the text/plain 429 form) to an Error
// whose code tells the caller what to do and whose message is the server's.
Error ErrorFromResponse(const HttpResponse& response, std::string_view what);

}  // namespace certctl::kube
