#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "certctl/kube/client.h"
#include "certctl/util/result.h"

namespace certctl::kube {

// Typed reads of objects the API server sent. They are untrusted input: a field of the wrong
// JSON type is a kBadResponse error naming the object (`what`, e.g. "secret/infra/x") and the
// field ("metadata.name is a number, not a string"), never an exception. Fields are named by
// JSON pointer ("/metadata/name"); absent and null fields are absent.

Result<std::optional<std::string>> OptionalString(const Json& object, std::string_view pointer,
                                                  std::string_view what);
Result<std::optional<std::int64_t>> OptionalInteger(const Json& object, std::string_view pointer,
                                                    std::string_view what);
// Absence is an error too.
Result<std::string> RequiredString(const Json& object, std::string_view pointer,
                                   std::string_view what);
// The object or array at `pointer`, or nullptr when absent.
Result<const Json*> OptionalObject(const Json& object, std::string_view pointer,
                                   std::string_view what);
Result<const Json*> OptionalArray(const Json& object, std::string_view pointer,
                                  std::string_view what);

// metadata.name, which every stored object has.
Result<std::string> ObjectName(const Json& object, std::string_view what);
// metadata.resourceVersion; empty when absent (objects built locally have none).
Result<std::string> ResourceVersion(const Json& object, std::string_view what);

// kBadResponse unless `object` is the one that was asked for: metadata.name equals `name`
// and, for a namespaced type, metadata.namespace (when the server sent one) equals `ns`. A
// server that answers for another object must never steer a later write to it.
Status ExpectIdentity(const Json& object, const ResourceType& type, std::string_view ns,
                      std::string_view name, std::string_view what);

}  // namespace certctl::kube
