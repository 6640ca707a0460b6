#include "certctl/fleet/object_copies.h"

#include <charconv>
#include <utility>

#include "certctl/fleet/requests.h"

namespace certctl::fleet {
namespace {

std::string CopyKey(const kube::ResourceType& type, std::string_view ns, std::string_view name) {
  std::string key(type.resource);
  key += '/';
  key += ns;
  key += '/';
  key += name;
  return key;
}

std::string CopyKey(const kube::ResourceType& type, const kube::Json& object) {
  return CopyKey(type, MetadataField(object, "namespace"), MetadataField(object, "name"));
}

// Events and the Lease are written often and never watched: nothing to keep or recognise.
bool Copied(const kube::ResourceType& type) {
  return type.resource != kube::kEvents.resource && type.resource != kube::kLeases.resource;
}

// kube-apiserver's resourceVersions are etcd revisions, decimal and rising; anything else is
// compared by arrival only.
bool Older(const std::string& version, const std::string& than) {
  std::uint64_t a = 0;
  std::uint64_t b = 0;
  const auto [a_end, a_error] = std::from_chars(version.data(), version.data() + version.size(), a);
  const auto [b_end, b_error] = std::from_chars(than.data(), than.data() + than.size(), b);
  return a_error == std::errc() && b_error == std::errc() &&
         a_end == version.data() + version.size() && b_end == than.data() + than.size() && a < b;
}

}  // namespace

void ObjectCopies::StoreLocked(const std::string& key, const kube::Json& object,
                               std::string_view watch, bool written) {
  std::string version = MetadataField(object, "resourceVersion");
  auto held = copies_.find(key);
  if (held != copies_.end() && Older(version, held->second.version)) {
    return;
  }
  Copy& copy = copies_[key];
  copy.text = object.dump();
  copy.text.shrink_to_fit();  // dump() grows it by doubling
  copy.version = std::move(version);
  if (!watch.empty()) {
    copy.watch = watch;
  }
  copy.written = written;
}

void ObjectCopies::Keep(const kube::ResourceType& type, const kube::Json& object,
                        std::string_view watch) {
  const std::string key = CopyKey(type, object);
  const std::lock_guard lock(mutex_);
  StoreLocked(key, object, watch, false);
}

void ObjectCopies::Forget(const kube::ResourceType& type, std::string_view ns,
                          std::string_view name) {
  const std::string key = CopyKey(type, ns, name);
  const std::lock_guard lock(mutex_);
  copies_.erase(key);
}

void ObjectCopies::ForgetUnlisted(
    std::string_view watch,
    const std::function<bool(std::string_view ns, std::string_view name)>& listed) {
  const std::lock_guard lock(mutex_);
  for (auto it = copies_.begin(); it != copies_.end();) {
    const std::string_view key = it->first;
    const std::size_t first = key.find('/');
    const std::size_t second = key.find('/', first + 1);
    if (it->second.watch == watch &&
        !listed(key.substr(first + 1, second - first - 1), key.substr(second + 1))) {
      it = copies_.erase(it);
    } else {
      ++it;
    }
  }
}

std::size_t ObjectCopies::size() const {
  const std::lock_guard lock(mutex_);
  return copies_.size();
}

bool ObjectCopies::IsEcho(const kube::ResourceType& type, const kube::Json& object,
                          std::string_view watch) {
  const std::string key = CopyKey(type, object);
  const std::lock_guard lock(mutex_);
  auto held = copies_.find(key);
  if (held == copies_.end() || !held->second.written) {
    return false;
  }
  held->second.written = false;
  if (held->second.version != MetadataField(object, "resourceVersion")) {
    return false;
  }
  held->second.watch = watch;
  return true;
}

Result<std::optional<kube::Json>> ObjectCopies::Get(const kube::ResourceType& type,
                                                    std::string_view ns, std::string_view name) {
  std::string text;
  {
    const std::lock_guard lock(mutex_);
    auto held = copies_.find(CopyKey(type, ns, name));
    if (held != copies_.end()) {
      text = held->second.text;
    }
  }
  if (text.empty()) {
    return inner_.Get(type, ns, name);
  }
  return std::optional<kube::Json>(kube::Json::parse(text));
}

Result<kube::Json> ObjectCopies::Written(const kube::ResourceType& type, std::string_view ns,
                                         std::string_view name, Result<kube::Json> written) {
  if (!Copied(type)) {
    return written;
  }
  const std::lock_guard lock(mutex_);
  if (written) {
    StoreLocked(CopyKey(type, *written), *written, "", true);
  } else {
    // A conflict, a failed `test`, a missing object: the copy is behind the server.
    copies_.erase(CopyKey(type, ns, name));
  }
  return written;
}

Result<kube::Json> ObjectCopies::Create(const kube::ResourceType& type, std::string_view ns,
                                        const kube::Json& object) {
  return Written(type, ns, MetadataField(object, "name"), inner_.Create(type, ns, object));
}

Result<kube::Json> ObjectCopies::Update(const kube::ResourceType& type, std::string_view ns,
                                        std::string_view name, const kube::Json& object) {
  return Written(type, ns, name, inner_.Update(type, ns, name, object));
}

Result<kube::Json> ObjectCopies::Patch(const kube::ResourceType& type, std::string_view ns,
                                       std::string_view name, kube::PatchType patch_type,
                                       const kube::Json& patch) {
  return Written(type, ns, name, inner_.Patch(type, ns, name, patch_type, patch));
}

Status ObjectCopies::Delete(const kube::ResourceType& type, std::string_view ns,
                            std::string_view name) {
  Forget(type, ns, name);
  return inner_.Delete(type, ns, name);
}

}  // namespace certctl::fleet
