#include "certctl/kube/object.h"

#include <limits>

#include "certctl/util/text.h"

namespace certctl::kube {
namespace {

// Names and values quoted in messages come from the server: kept short and printable.
constexpr std::size_t kMaxQuoted = 80;

// "/metadata/name" -> "metadata.name", as kubectl and the API's field errors spell paths.
std::string FieldName(std::string_view pointer) {
  if (pointer.empty() || pointer == "/") {
    return "the object";
  }
  std::string name(pointer.substr(pointer.empty() || pointer[0] != '/' ? 0 : 1));
  for (char& c : name) {
    if (c == '/') {
      c = '.';
    }
  }
  return name;
}

std::string_view TypeName(const Json& value) {
  switch (value.type()) {
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return "a number";
    default:
      return "null";
  }
}

tl::unexpected<Error> WrongType(std::string_view what, std::string_view pointer, const Json& value,
                                std::string_view expected) {
  return Fail(ErrorCode::kBadResponse, std::string(what) + ": " + FieldName(pointer) + " is " +
                                           std::string(TypeName(value)) + ", not " +
                                           std::string(expected));
}

// The value at `pointer`, or nullptr when it is absent or null. Pointers here are our own
// constants ("/metadata/name"): plain tokens, no escapes.
Result<const Json*> Find(const Json& object, std::string_view pointer, std::string_view what) {
  const Json* current = &object;
  std::size_t pos = 0;
  while (pos < pointer.size()) {
    const std::size_t start = pos + 1;
    const std::size_t next = pointer.find('/', start);
    const std::string_view token = pointer.substr(
        start, next == std::string_view::npos ? std::string_view::npos : next - start);
    if (!current->is_object()) {
      return WrongType(what, pointer.substr(0, pos), *current, "an object");
    }
    const auto it = current->find(token);
    if (it == current->end() || it->is_null()) {
      return nullptr;
    }
    current = &*it;
    pos = next == std::string_view::npos ? pointer.size() : next;
  }
  return current;
}

}  // namespace

Result<std::optional<std::string>> OptionalString(const Json& object, std::string_view pointer,
                                                  std::string_view what) {
  auto value = Find(object, pointer, what);
  if (!value) {
    return Fail(value.error());
  }
  if (*value == nullptr) {
    return std::optional<std::string>();
  }
  if (!(*value)->is_string()) {
    return WrongType(what, pointer, **value, "a string");
  }
  return std::optional<std::string>((*value)->get<std::string>());
}

Result<std::optional<std::int64_t>> OptionalInteger(const Json& object, std::string_view pointer,
                                                    std::string_view what) {
  auto value = Find(object, pointer, what);
  if (!value) {
    return Fail(value.error());
  }
  if (*value == nullptr) {
    return std::optional<std::int64_t>();
  }
  const Json& number = **value;
  // An unsigned value past int64's range is a whole number, just not one we can use.
  const bool fits = number.is_number_integer() &&
                    !(number.is_number_unsigned() &&
                      number.get<std::uint64_t>() >
                          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
  if (!fits) {
    return WrongType(what, pointer, number, "an integer");
  }
  return std::optional<std::int64_t>(number.get<std::int64_t>());
}

Result<std::string> RequiredString(const Json& object, std::string_view pointer,
                                   std::string_view what) {
  auto value = OptionalString(object, pointer, what);
  if (!value) {
    return Fail(value.error());
  }
  if (!value->has_value()) {
    return Fail(ErrorCode::kBadResponse,
                std::string(what) + ": " + FieldName(pointer) + " is missing");
  }
  return std::move(**value);
}

Result<const Json*> OptionalObject(const Json& object, std::string_view pointer,
                                   std::string_view what) {
  auto value = Find(object, pointer, what);
  if (value && *value != nullptr && !(*value)->is_object()) {
    return WrongType(what, pointer, **value, "an object");
  }
  return value;
}

Result<const Json*> OptionalArray(const Json& object, std::string_view pointer,
                                  std::string_view what) {
  auto value = Find(object, pointer, what);
  if (value && *value != nullptr && !(*value)->is_array()) {
    return WrongType(what, pointer, **value, "an array");
  }
  return value;
}

Result<std::string> ObjectName(const Json& object, std::string_view what) {
  return RequiredString(object, "/metadata/name", what);
}

Result<std::string> ResourceVersion(const Json& object, std::string_view what) {
  auto version = OptionalString(object, "/metadata/resourceVersion", what);
  if (!version) {
    return Fail(version.error());
  }
  return version->value_or("");
}

Status ExpectIdentity(const Json& object, const ResourceType& type, std::string_view ns,
                      std::string_view name, std::string_view what) {
  if (!object.is_object()) {
    return Fail(ErrorCode::kBadResponse, std::string(what) + ": the server answered with " +
                                             std::string(TypeName(object)) +
                                             " instead of an object");
  }
  auto actual_name = ObjectName(object, what);
  if (!actual_name) {
    return Fail(actual_name.error());
  }
  if (*actual_name != name) {
    return Fail(ErrorCode::kBadResponse,
                std::string(what) + ": the server answered with another object, named \"" +
                    OneLine(*actual_name, kMaxQuoted) + "\"; nothing was written to it");
  }
  if (!type.namespaced) {
    return {};
  }
  auto actual_ns = OptionalString(object, "/metadata/namespace", what);
  if (!actual_ns) {
    return Fail(actual_ns.error());
  }
  if (actual_ns->has_value() && **actual_ns != ns) {
    return Fail(ErrorCode::kBadResponse,
                std::string(what) +
                    ": the server answered with an object of another namespace, \"" +
                    OneLine(**actual_ns, kMaxQuoted) + "\"; nothing was written to it");
  }
  return {};
}

}  // namespace certctl::kube
