// The controller's copies of the objects it works on, kept from its own watches and writes so
// that a reconcile reads them without asking the API server. Only the Secrets an annotation
// names and the targets that carry a valid annotation are kept (the controller decides, with
// Keep and Forget); a Get of anything else, or of something not seen yet, is sent on. A copy
// is the newest the controller saw: a write that fails on a conflict, an invalid patch or a
// missing object forgets it, so that the retry reads the server. Without copies a start with
// 1,000 targets sends 2,000 GETs of objects its own lists delivered a moment before.
//
// It also recognises the echo of the controller's own writes: a watch event carrying exactly
// the resourceVersion a write answered with is not news, the reconcile that made it already
// judged the object as it now stands.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "certctl/kube/client.h"

namespace certctl::fleet {

class ObjectCopies : public kube::Client {
 public:
  explicit ObjectCopies(kube::Client& inner) : inner_(inner) {}

  // `object` (of `type`, as `watch` delivered it) is the copy to read from now on, unless the
  // copy held is newer (a watch event that arrives after the answer to a later write).
  void Keep(const kube::ResourceType& type, const kube::Json& object, std::string_view watch);
  void Forget(const kube::ResourceType& type, std::string_view ns, std::string_view name);
  // After `watch` listed again: its copies of objects the list no longer holds are forgotten.
  void ForgetUnlisted(
      std::string_view watch,
      const std::function<bool(std::string_view ns, std::string_view name)>& listed);
  std::size_t size() const;

  // Whether an event of `watch` about `object` (of `type`) is the echo of this client's last
  // write of it (the copy is then that watch's). The record of the write is forgotten either
  // way: a later event is someone's news.
  bool IsEcho(const kube::ResourceType& type, const kube::Json& object, std::string_view watch);

  Result<std::optional<kube::Json>> Get(const kube::ResourceType& type, std::string_view ns,
                                        std::string_view name) override;
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
                            const kube::Json& object) override;
  Result<kube::Json> Update(const kube::ResourceType& type, std::string_view ns,
                            std::string_view name, const kube::Json& object) override;
  Result<kube::Json> Patch(const kube::ResourceType& type, std::string_view ns,
                           std::string_view name, kube::PatchType patch_type,
                           const kube::Json& patch) override;
  Status Delete(const kube::ResourceType& type, std::string_view ns,
                std::string_view name) override;
  Status Watch(const kube::ResourceType& type, std::string_view ns,
               const kube::WatchOptions& options,
               const std::function<bool(const kube::WatchEvent&)>& on_event,
               const std::function<bool()>& cancelled) override {
    return inner_.Watch(type, ns, options, on_event, cancelled);
  }
  void WakeWatches() override { inner_.WakeWatches(); }

 private:
  struct Copy {
    std::string text;      // the object as compact JSON: a third of its parsed size
    std::string version;   // its resourceVersion
    std::string watch;     // the watch that delivered it ("" for a write not seen there yet)
    bool written = false;  // by this client, its echo not seen yet
  };

  // Keeps the answer to a write of `type` `ns`/`name`, or forgets the copy when the write
  // failed in a way that says the copy is out of date.
  Result<kube::Json> Written(const kube::ResourceType& type, std::string_view ns,
                             std::string_view name, Result<kube::Json> written);
  // Stores `object` as the copy of `key` unless the one held is newer. Needs mutex_.
  void StoreLocked(const std::string& key, const kube::Json& object, std::string_view watch,
                   bool written);

  kube::Client& inner_;
  mutable std::mutex mutex_;
  std::map<std::string, Copy> copies_;  // by "resource/namespace/name"
};

}  // namespace certctl::fleet
