#include "certctl/fleet/own_writes.h"

#include <utility>

#include "certctl/fleet/requests.h"

namespace certctl::fleet {
namespace {

std::string WrittenKey(const kube::ResourceType& type, const kube::Json& object) {
  return std::string(type.resource) + "/" + MetadataField(object, "namespace") + "/" +
         MetadataField(object, "name");
}

}  // namespace

Result<kube::Json> OwnWrites::Remember(const kube::ResourceType& type, Result<kube::Json> written) {
  // Events and the Lease are written often and never watched: nothing to recognise.
  if (written && type.resource != kube::kEvents.resource &&
      type.resource != kube::kLeases.resource) {
    const std::string version = MetadataField(*written, "resourceVersion");
    if (!version.empty()) {
      const std::lock_guard lock(mutex_);
      written_[WrittenKey(type, *written)] = version;
    }
  }
  return written;
}

bool OwnWrites::IsEcho(const kube::ResourceType& type, const kube::Json& object) {
  const std::lock_guard lock(mutex_);
  auto found = written_.find(WrittenKey(type, object));
  if (found == written_.end()) {
    return false;
  }
  const bool echo = found->second == MetadataField(object, "resourceVersion");
  written_.erase(found);
  return echo;
}

}  // namespace certctl::fleet
