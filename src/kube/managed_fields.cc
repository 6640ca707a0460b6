#include "certctl/kube/managed_fields.h"

#include <algorithm>

namespace certctl::kube {
namespace {

bool Holds(const Json& fields, const std::string& key) {
  if (!fields.is_object()) {
    return false;
  }
  for (const auto& [name, value] : fields.items()) {
    if (name == key || Holds(value, key)) {
      return true;
    }
  }
  return false;
}

std::string StringOr(const Json& entry, const char* name) {
  const auto found = entry.find(name);
  return found != entry.end() && found->is_string() ? found->get<std::string>() : "";
}

}  // namespace

std::vector<FieldManager> ManagersOfField(const Json& object, std::string_view field) {
  std::vector<FieldManager> managers;
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) {
    return managers;
  }
  const Json& metadata = object["metadata"];
  const auto entries = metadata.find("managedFields");
  if (entries == metadata.end() || !entries->is_array()) {
    return managers;
  }
  const std::string key = "f:" + std::string(field);
  for (const Json& entry : *entries) {
    if (!entry.is_object() || !entry.contains("fieldsV1") || !Holds(entry["fieldsV1"], key)) {
      continue;
    }
    managers.push_back(
        {StringOr(entry, "manager"), StringOr(entry, "operation"), StringOr(entry, "time")});
  }
  // RFC 3339 in UTC with the same precision sorts as text.
  std::stable_sort(managers.begin(), managers.end(),
                   [](const FieldManager& a, const FieldManager& b) { return a.time > b.time; });
  return managers;
}

}  // namespace certctl::kube
