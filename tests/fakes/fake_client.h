#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "certctl/kube/client.h"
#include "certctl/util/result.h"

namespace certctl::testing {

enum class Verb { kGet, kList, kCreate, kUpdate, kPatch, kDelete, kWatch };

std::string_view VerbName(Verb verb);  // "get", "list", ...

// One call the code under test made, whatever its outcome.
struct FakeRequest {
  Verb verb;
  std::string resource;  // plural: "secrets", "validatingwebhookconfigurations"
  std::string ns;        // empty for cluster-scoped types and for lists across namespaces
  std::string name;      // empty for List and Watch
};

// An in-memory API server behind the kube::Client seam, with the semantics the controller
// relies on:
//  - objects are kept per (resource, namespace, name); the namespace is ignored for
//    cluster-scoped types;
//  - one resourceVersion counter for all objects, bumped on every real change and written
//    into metadata.resourceVersion; an update or patch that changes nothing keeps it;
//  - Create of a present object is kAlreadyExists, Update with a stale
//    metadata.resourceVersion (or a patch carrying one) is kConflict, with the API server's
//    messages; Update, Patch and Delete of an absent object are kNotFound;
//  - Patch: JSON merge patch (RFC 7386), JSON patch (RFC 6902; a failed `test` is
//    kInvalidArgument) and strategic merge, which merges maps and merges webhooks[] by
//    name (every other list is replaced, as for lists without a patch strategy);
//  - List understands equality label selectors (`k=v`, `k==v`, `k!=v`, `k`, `!k`, joined
//    by commas) and the metadata.name / metadata.namespace field selectors; like the real
//    server, list items carry no kind/apiVersion;
//  - Watch is not supported yet: it answers kUnavailable (or an injected failure).
// Every call is recorded (failed ones included) so tests can count reads and writes.
// Thread-safe.
class FakeClient final : public kube::Client {
 public:
  using Json = kube::Json;

  Result<std::optional<Json>> Get(const kube::ResourceType& type, std::string_view ns,
                                  std::string_view name) override;
  Result<Json> List(const kube::ResourceType& type, std::string_view ns,
                    const kube::ListOptions& options) override;
  Result<Json> Create(const kube::ResourceType& type, std::string_view ns,
                      const Json& object) override;
  Result<Json> Update(const kube::ResourceType& type, std::string_view ns, std::string_view name,
                      const Json& object) override;
  Result<Json> Patch(const kube::ResourceType& type, std::string_view ns, std::string_view name,
                     kube::PatchType patch_type, const Json& patch) override;
  Status Delete(const kube::ResourceType& type, std::string_view ns,
                std::string_view name) override;
  Status Watch(const kube::ResourceType& type, std::string_view ns,
               const kube::WatchOptions& options,
               const std::function<bool(const kube::WatchEvent&)>& on_event,
               const std::function<bool()>& cancelled) override;

  // --- Test controls: none of these is recorded as a request. ---

  // Stores `object` as is (its metadata.namespace picks the namespace, "default" when
  // absent), with kind, apiVersion and a fresh resourceVersion; returns what is stored.
  Json Put(const kube::ResourceType& type, Json object);
  // Removes an object behind the client's back; false when there was none.
  bool Remove(const kube::ResourceType& type, std::string_view ns, std::string_view name);
  // The stored object, if any.
  std::optional<Json> Object(const kube::ResourceType& type, std::string_view ns,
                             std::string_view name) const;

  // The next `count` calls of `verb` on `type` fail with `error` (retry_after included).
  // Injections for the same verb and type are used up in the order they were made.
  void InjectFailure(Verb verb, const kube::ResourceType& type, Error error, int count = 1);

  std::vector<FakeRequest> Requests() const;
  // Create, Update, Patch and Delete calls, whether or not they changed anything.
  int WriteCount() const;
  // Get and List calls (Watch is not counted).
  int ReadCount() const;
  // Calls of `verb` on `type`, for one object when `name` is given.
  int CountOf(Verb verb, const kube::ResourceType& type, std::string_view name = {}) const;
  void ClearRequests();

  // The counter's current value: the resourceVersion of the latest change.
  std::uint64_t resource_version() const;

 private:
  using Key = std::tuple<std::string, std::string, std::string>;  // resource, ns, name

  struct Injection {
    Verb verb;
    std::string resource;
    Error error;
    int remaining;
  };

  // Records the call and returns the injected failure it should meet, if any.
  std::optional<Error> Begin(Verb verb, const kube::ResourceType& type, std::string_view ns,
                             std::string_view name);
  // Stores `object` under `key` unless it equals what is there; returns what is stored.
  Json Store(const Key& key, const kube::ResourceType& type, Json object);

  mutable std::mutex mutex_;
  std::map<Key, Json> objects_;
  std::uint64_t resource_version_ = 0;
  std::deque<Injection> injections_;
  std::vector<FakeRequest> requests_;
};

}  // namespace certctl::testing
