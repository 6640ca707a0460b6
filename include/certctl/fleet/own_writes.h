// The controller's own writes, recognised when its watches bring them back. Every write through
// this client (create, update, patch) leaves the resourceVersion the API server answered with;
// a watch event carrying exactly that version is the echo of the write, not news: the
// reconcile that made it already judged the object as it now stands. Reconciling it again
// would read the Secret and every target once more for nothing (at 1,000 Secrets, a quarter of
// the requests of a start).
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "certctl/kube/client.h"

namespace certctl::fleet {

class OwnWrites : public kube::Client {
 public:
  explicit OwnWrites(kube::Client& inner) : inner_(inner) {}

  // Whether a watch event about `object` (its type, as watched) is the echo of this client's
  // last write of it. The record is forgotten either way: a later event is someone's news.
  bool IsEcho(const kube::ResourceType& type, const kube::Json& object);

  Result<std::optional<kube::Json>> Get(const kube::ResourceType& type, std::string_view ns,
                                        std::string_view name) override {
    return inner_.Get(type, ns, name);
  }
  Result<kube::Json> List(const kube::ResourceType& type, std::string_view ns,
                          const kube::ListOptions& options) override {
    return inner_.List(type, ns, options);
  }
  Status ListPages(const kube::ResourceType& type, std::string_view ns,
                   const kube::ListOptions& options,
                   const std::function<Status(kube::Json& items)>& on_page) override {
    return inner_.ListPages(type, ns, options, on_page);
  }
  Result<std::string> ListPagesAt(
      const kube::ResourceType& type, std::string_view ns, const kube::ListOptions& options,
      const std::function<Status(kube::Json& items)>& on_page) override {
    return inner_.ListPagesAt(type, ns, options, on_page);
  }
  Result<kube::Json> Create(const kube::ResourceType& type, std::string_view ns,
                            const kube::Json& object) override {
    return Remember(type, inner_.Create(type, ns, object));
  }
  Result<kube::Json> Update(const kube::ResourceType& type, std::string_view ns,
                            std::string_view name, const kube::Json& object) override {
    return Remember(type, inner_.Update(type, ns, name, object));
  }
  Result<kube::Json> Patch(const kube::ResourceType& type, std::string_view ns,
                           std::string_view name, kube::PatchType patch_type,
                           const kube::Json& patch) override {
    return Remember(type, inner_.Patch(type, ns, name, patch_type, patch));
  }
  Status Delete(const kube::ResourceType& type, std::string_view ns,
                std::string_view name) override {
    return inner_.Delete(type, ns, name);
  }
  Status Watch(const kube::ResourceType& type, std::string_view ns,
               const kube::WatchOptions& options,
               const std::function<bool(const kube::WatchEvent&)>& on_event,
               const std::function<bool()>& cancelled) override {
    return inner_.Watch(type, ns, options, on_event, cancelled);
  }
  void WakeWatches() override { inner_.WakeWatches(); }

 private:
  Result<kube::Json> Remember(const kube::ResourceType& type, Result<kube::Json> written);

  kube::Client& inner_;
  std::mutex mutex_;
  // "resource/namespace/name" -> the resourceVersion of this client's last write of it. Only
  // objects the controller writes (its Secrets, targets, Events, the Lease) are here; an entry
  // goes with the object's next event.
  std::map<std::string, std::string> written_;
};

}  // namespace certctl::fleet
