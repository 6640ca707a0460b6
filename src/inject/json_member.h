#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace certctl::inject::internal {

// object[key], or nullptr when `object` is not an object or the member is absent or null
// (the API server's JSON leaves an unset field out or sends null alike).
inline const nlohmann::json* Member(const nlohmann::json& object, std::string_view key) {
  if (!object.is_object()) {
    return nullptr;
  }
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace certctl::inject::internal
