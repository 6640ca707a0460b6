#include "fakes/fake_client.h"

#include <algorithm>
#include <utility>

namespace certctl::testing {
namespace {

using Json = nlohmann::json;

constexpr char kOptimisticLock[] =
    "the object has been modified; please apply your changes to the latest version and try "
    "again";

// "secrets", "validatingwebhookconfigurations.admissionregistration.k8s.io": how the API
// server names a resource in its messages.
std::string GroupResource(const kube::ResourceType& type) {
  std::string out(type.resource);
  if (!type.group.empty()) {
    out += ".";
    out += type.group;
  }
  return out;
}

std::string ApiVersion(const kube::ResourceType& type) {
  return type.group.empty() ? std::string(type.version)
                            : std::string(type.group) + "/" + std::string(type.version);
}

std::string Quoted(std::string_view text) { return "\"" + std::string(text) + "\""; }

Error NotFound(const kube::ResourceType& type, std::string_view name) {
  return Error(ErrorCode::kNotFound, GroupResource(type) + " " + Quoted(name) + " not found");
}

Error Conflict(const kube::ResourceType& type, std::string_view name) {
  return Error(ErrorCode::kConflict, "Operation cannot be fulfilled on " + GroupResource(type) +
                                         " " + Quoted(name) + ": " + kOptimisticLock);
}

Error Invalid(std::string message) {
  return Error(ErrorCode::kInvalidArgument, std::move(message));
}

std::string StringAt(const Json& object, const Json::json_pointer& pointer) {
  if (!object.contains(pointer)) {
    return "";
  }
  const Json& value = object.at(pointer);
  return value.is_string() ? value.get<std::string>() : "";
}

std::string NameOf(const Json& object) { return StringAt(object, "/metadata/name"_json_pointer); }
std::string NamespaceOf(const Json& object) {
  return StringAt(object, "/metadata/namespace"_json_pointer);
}
std::string ResourceVersionOf(const Json& object) {
  return StringAt(object, "/metadata/resourceVersion"_json_pointer);
}

Json& MetadataOf(Json& object) {
  if (!object.contains("metadata") || !object["metadata"].is_object()) {
    object["metadata"] = Json::object();
  }
  return object["metadata"];
}

// --- selectors ---------------------------------------------------------------------------

std::string Trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) {
    return "";
  }
  const auto last = text.find_last_not_of(" \t");
  return std::string(text.substr(first, last - first + 1));
}

std::vector<std::string> SplitTerms(std::string_view selector) {
  std::vector<std::string> terms;
  std::size_t start = 0;
  while (start <= selector.size()) {
    const auto comma = std::min(selector.find(',', start), selector.size());
    std::string term = Trim(selector.substr(start, comma - start));
    if (!term.empty()) {
      terms.push_back(std::move(term));
    }
    start = comma + 1;
  }
  return terms;
}

enum class Op { kEquals, kNotEquals, kExists, kNotExists };

struct Requirement {
  std::string key;
  Op op;
  std::string value;
};

Result<std::vector<Requirement>> ParseSelector(std::string_view selector, std::string_view what) {
  std::vector<Requirement> requirements;
  for (const std::string& term : SplitTerms(selector)) {
    if (term.find('(') != std::string::npos || term.find(')') != std::string::npos) {
      return Fail(Invalid(std::string(what) + " \"" + term +
                          "\": set-based requirements are not supported by FakeClient"));
    }
    Requirement requirement;
    if (auto at = term.find("!="); at != std::string::npos) {
      requirement = {term.substr(0, at), Op::kNotEquals, term.substr(at + 2)};
    } else if (at = term.find("=="); at != std::string::npos) {
      requirement = {term.substr(0, at), Op::kEquals, term.substr(at + 2)};
    } else if (at = term.find('='); at != std::string::npos) {
      requirement = {term.substr(0, at), Op::kEquals, term.substr(at + 1)};
    } else if (term[0] == '!') {
      requirement = {term.substr(1), Op::kNotExists, ""};
    } else {
      requirement = {term, Op::kExists, ""};
    }
    requirement.key = Trim(requirement.key);
    requirement.value = Trim(requirement.value);
    if (requirement.key.empty()) {
      return Fail(Invalid(std::string(what) + " \"" + term + "\": empty key"));
    }
    requirements.push_back(std::move(requirement));
  }
  return requirements;
}

bool Matches(const std::vector<Requirement>& requirements,
             const std::function<std::optional<std::string>(const std::string&)>& lookup) {
  for (const Requirement& requirement : requirements) {
    const std::optional<std::string> value = lookup(requirement.key);
    switch (requirement.op) {
      case Op::kEquals:
        if (!value || *value != requirement.value) {
          return false;
        }
        break;
      case Op::kNotEquals:
        if (value && *value == requirement.value) {
          return false;
        }
        break;
      case Op::kExists:
        if (!value) {
          return false;
        }
        break;
      case Op::kNotExists:
        if (value) {
          return false;
        }
        break;
    }
  }
  return true;
}

std::optional<std::string> LabelOf(const Json& object, const std::string& key) {
  const auto pointer = "/metadata/labels"_json_pointer;
  if (!object.contains(pointer) || !object.at(pointer).is_object()) {
    return std::nullopt;
  }
  const Json& labels = object.at(pointer);
  auto it = labels.find(key);
  if (it == labels.end() || !it->is_string()) {
    return std::nullopt;
  }
  return it->get<std::string>();
}

// --- strategic merge patch ---------------------------------------------------------------

// Lists strategic merge merges by a key instead of replacing them, by JSON pointer: the
// ones certctl patches. "webhooks" carries patchStrategy=merge, patchMergeKey=name in both
// admissionregistration.k8s.io/v1 webhook configuration types.
std::optional<std::string> MergeKeyFor(const std::string& path) {
  if (path == "/webhooks") {
    return "name";
  }
  return std::nullopt;
}

Result<Json> StrategicMerge(const Json& original, const Json& patch, const std::string& path);

Result<Json> MergeList(const Json& original, const Json& patch, const std::string& key,
                       const std::string& path) {
  Json result = original.is_array() ? original : Json::array();
  for (const Json& item : patch) {
    if (!item.is_object() || !item.contains(key)) {
      return Fail(Invalid("map: " + item.dump() + " does not contain declared merge key: " + key));
    }
    auto found = std::find_if(result.begin(), result.end(), [&](const Json& entry) {
      return entry.is_object() && entry.contains(key) && entry[key] == item[key];
    });
    if (item.contains("$patch") && item["$patch"] == "delete") {
      if (found != result.end()) {
        result.erase(found);
      }
      continue;
    }
    Json entry_patch = item;
    entry_patch.erase("$patch");
    auto merged =
        StrategicMerge(found != result.end() ? *found : Json::object(), entry_patch, path + "/*");
    if (!merged) {
      return Fail(merged.error());
    }
    if (found != result.end()) {
      *found = std::move(*merged);
    } else {
      result.push_back(std::move(*merged));
    }
  }
  return result;
}

Result<Json> StrategicMerge(const Json& original, const Json& patch, const std::string& path) {
  if (!patch.is_object()) {
    return Fail(Invalid("strategic merge patch at \"" + path + "\" is not a JSON object"));
  }
  Json result = original.is_object() ? original : Json::object();
  for (const auto& [key, value] : patch.items()) {
    if (!key.empty() && key[0] == '$') {
      if (key == "$patch" && value == "merge") {
        continue;
      }
      return Fail(Invalid("strategic merge directive " + key + " is not supported by FakeClient"));
    }
    const std::string child = path + "/" + key;
    if (value.is_null()) {
      result.erase(key);
    } else if (value.is_object()) {
      auto merged =
          StrategicMerge(result.contains(key) ? result[key] : Json::object(), value, child);
      if (!merged) {
        return Fail(merged.error());
      }
      result[key] = std::move(*merged);
    } else if (auto merge_key = MergeKeyFor(child); value.is_array() && merge_key) {
      auto merged =
          MergeList(result.contains(key) ? result[key] : Json::array(), value, *merge_key, child);
      if (!merged) {
        return Fail(merged.error());
      }
      result[key] = std::move(*merged);
    } else {
      result[key] = value;
    }
  }
  return result;
}

bool IsWrite(Verb verb) {
  return verb == Verb::kCreate || verb == Verb::kUpdate || verb == Verb::kPatch ||
         verb == Verb::kDelete;
}

}  // namespace

std::string_view VerbName(Verb verb) {
  switch (verb) {
    case Verb::kGet:
      return "get";
    case Verb::kList:
      return "list";
    case Verb::kCreate:
      return "create";
    case Verb::kUpdate:
      return "update";
    case Verb::kPatch:
      return "patch";
    case Verb::kDelete:
      return "delete";
    case Verb::kWatch:
      return "watch";
  }
  return "unknown";
}

std::optional<Error> FakeClient::Begin(Verb verb, const kube::ResourceType& type,
                                       std::string_view ns, std::string_view name) {
  requests_.push_back({verb, std::string(type.resource), type.namespaced ? std::string(ns) : "",
                       std::string(name)});
  const std::string resource(type.resource);
  for (auto it = injections_.begin(); it != injections_.end(); ++it) {
    if (it->verb == verb && it->resource == resource) {
      Error error = it->error;
      if (--it->remaining <= 0) {
        injections_.erase(it);
      }
      return error;
    }
  }
  if (type.namespaced && ns.empty() && verb != Verb::kList && verb != Verb::kWatch) {
    return Invalid("an empty namespace may not be set when a resource name is provided (" +
                   GroupResource(type) + " " + Quoted(name) + ")");
  }
  return std::nullopt;
}

FakeClient::Json FakeClient::Store(const Key& key, const kube::ResourceType& type, Json object) {
  object["apiVersion"] = ApiVersion(type);
  object["kind"] = std::string(type.kind);
  Json& metadata = MetadataOf(object);
  metadata["name"] = std::get<2>(key);
  if (type.namespaced) {
    metadata["namespace"] = std::get<1>(key);
  } else {
    metadata.erase("namespace");
  }
  auto existing = objects_.find(key);
  if (existing != objects_.end()) {
    metadata["resourceVersion"] = ResourceVersionOf(existing->second);
    if (object == existing->second) {
      return existing->second;  // no change, no new resourceVersion
    }
  }
  metadata["resourceVersion"] = std::to_string(++resource_version_);
  objects_[key] = object;
  return object;
}

Result<std::optional<FakeClient::Json>> FakeClient::Get(const kube::ResourceType& type,
                                                        std::string_view ns,
                                                        std::string_view name) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto failure = Begin(Verb::kGet, type, ns, name)) {
    return Fail(std::move(*failure));
  }
  auto it = objects_.find(
      {std::string(type.resource), type.namespaced ? std::string(ns) : "", std::string(name)});
  if (it == objects_.end()) {
    return std::optional<Json>();
  }
  return std::optional<Json>(it->second);
}

Result<FakeClient::Json> FakeClient::List(const kube::ResourceType& type, std::string_view ns,
                                          const kube::ListOptions& options) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto failure = Begin(Verb::kList, type, ns, "")) {
    return Fail(std::move(*failure));
  }
  auto labels = ParseSelector(options.label_selector, "label selector");
  if (!labels) {
    return Fail(labels.error());
  }
  auto fields = ParseSelector(options.field_selector, "field selector");
  if (!fields) {
    return Fail(fields.error());
  }
  for (const Requirement& field : *fields) {
    if ((field.key != "metadata.name" && field.key != "metadata.namespace") ||
        field.op == Op::kExists || field.op == Op::kNotExists) {
      return Fail(Invalid("field label not supported: " + field.key));
    }
  }
  const std::string resource(type.resource);
  Json items = Json::array();
  for (const auto& entry : objects_) {
    const Key& key = entry.first;
    const Json& object = entry.second;  // named, not bound: lambdas below capture it
    if (std::get<0>(key) != resource ||
        (type.namespaced && !ns.empty() && std::get<1>(key) != ns)) {
      continue;
    }
    const bool labels_match =
        Matches(*labels, [&](const std::string& label) { return LabelOf(object, label); });
    const bool fields_match =
        Matches(*fields, [&](const std::string& field) -> std::optional<std::string> {
          return field == "metadata.name" ? NameOf(object) : NamespaceOf(object);
        });
    if (labels_match && fields_match) {
      Json item = object;
      item.erase("kind");
      item.erase("apiVersion");
      items.push_back(std::move(item));
    }
  }
  return Json{{"apiVersion", ApiVersion(type)},
              {"kind", std::string(type.kind) + "List"},
              {"metadata", {{"resourceVersion", std::to_string(resource_version_)}}},
              {"items", std::move(items)}};
}

Result<FakeClient::Json> FakeClient::Create(const kube::ResourceType& type, std::string_view ns,
                                            const Json& object) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string name = NameOf(object);
  if (auto failure = Begin(Verb::kCreate, type, ns, name)) {
    return Fail(std::move(*failure));
  }
  if (name.empty()) {
    return Fail(Invalid(std::string(type.kind) +
                        " \"\" is invalid: metadata.name: Required value: name or generateName "
                        "is required"));
  }
  if (type.namespaced && !NamespaceOf(object).empty() && NamespaceOf(object) != ns) {
    return Fail(
        Invalid("the namespace of the provided object does not match the namespace "
                "sent on the request"));
  }
  if (!ResourceVersionOf(object).empty()) {
    return Fail(Invalid("resourceVersion should not be set on objects to be created"));
  }
  const Key key{std::string(type.resource), type.namespaced ? std::string(ns) : "", name};
  if (objects_.count(key) != 0) {
    return Fail(Error(ErrorCode::kAlreadyExists,
                      GroupResource(type) + " " + Quoted(name) + " already exists"));
  }
  return Store(key, type, object);
}

Result<FakeClient::Json> FakeClient::Update(const kube::ResourceType& type, std::string_view ns,
                                            std::string_view name_in_url, const Json& object) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string name(name_in_url);
  if (auto failure = Begin(Verb::kUpdate, type, ns, name)) {
    return Fail(std::move(*failure));
  }
  if (name.empty()) {
    return Fail(Invalid(std::string(type.kind) +
                        " \"\" is invalid: metadata.name: Required value: name is required"));
  }
  if (!NameOf(object).empty() && NameOf(object) != name) {
    return Fail(Error(ErrorCode::kInvalidArgument, "the name of the object (" + NameOf(object) +
                                                       ") does not match the name on the URL (" +
                                                       name + ")"));
  }
  if (type.namespaced && !NamespaceOf(object).empty() && NamespaceOf(object) != ns) {
    return Fail(
        Invalid("the namespace of the provided object does not match the namespace "
                "sent on the request"));
  }
  const Key key{std::string(type.resource), type.namespaced ? std::string(ns) : "", name};
  auto existing = objects_.find(key);
  if (existing == objects_.end()) {
    return Fail(NotFound(type, name));
  }
  const std::string wanted = ResourceVersionOf(object);
  if (!wanted.empty() && wanted != ResourceVersionOf(existing->second)) {
    return Fail(Conflict(type, name));
  }
  return Store(key, type, object);
}

Result<FakeClient::Json> FakeClient::Patch(const kube::ResourceType& type, std::string_view ns,
                                           std::string_view name, kube::PatchType patch_type,
                                           const Json& patch) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto failure = Begin(Verb::kPatch, type, ns, name)) {
    return Fail(std::move(*failure));
  }
  const Key key{std::string(type.resource), type.namespaced ? std::string(ns) : "",
                std::string(name)};
  auto existing = objects_.find(key);
  if (existing == objects_.end()) {
    return Fail(NotFound(type, name));
  }
  Json patched;
  switch (patch_type) {
    case kube::PatchType::kMerge:
      if (!patch.is_object()) {
        return Fail(Invalid("merge patch is not a JSON object"));
      }
      patched = existing->second;
      patched.merge_patch(patch);
      break;
    case kube::PatchType::kJsonPatch:
      if (!patch.is_array()) {
        return Fail(Invalid("JSON patch is not a JSON array"));
      }
      try {
        patched = existing->second.patch(patch);
      } catch (const Json::exception& e) {
        return Fail(Invalid(std::string("the server rejected our request due to an error in our "
                                        "request: ") +
                            e.what()));
      }
      break;
    case kube::PatchType::kStrategicMerge: {
      auto merged = StrategicMerge(existing->second, patch, "");
      if (!merged) {
        return Fail(merged.error());
      }
      patched = std::move(*merged);
      break;
    }
  }
  if (!patched.is_object()) {
    return Fail(Invalid("the patched object is not a JSON object"));
  }
  // A resourceVersion the patch sets is a precondition, as on the real server.
  const std::string wanted = ResourceVersionOf(patched);
  if (!wanted.empty() && wanted != ResourceVersionOf(existing->second)) {
    return Fail(Conflict(type, name));
  }
  if (NameOf(patched) != name) {
    return Fail(Invalid("the name of the object (" + NameOf(patched) +
                        ") does not match the name on the URL (" + std::string(name) + ")"));
  }
  if (type.namespaced && NamespaceOf(patched) != ns) {
    return Fail(Invalid("the namespace of the object (" + NamespaceOf(patched) +
                        ") does not match the namespace on the URL (" + std::string(ns) + ")"));
  }
  return Store(key, type, std::move(patched));
}

Status FakeClient::Delete(const kube::ResourceType& type, std::string_view ns,
                          std::string_view name) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto failure = Begin(Verb::kDelete, type, ns, name)) {
    return Fail(std::move(*failure));
  }
  auto existing = objects_.find(
      {std::string(type.resource), type.namespaced ? std::string(ns) : "", std::string(name)});
  if (existing == objects_.end()) {
    return Fail(NotFound(type, name));
  }
  objects_.erase(existing);
  ++resource_version_;
  return {};
}

Status FakeClient::Watch(const kube::ResourceType& type, std::string_view ns,
                         const kube::WatchOptions& /*options*/,
                         const std::function<bool(const kube::WatchEvent&)>& /*on_event*/,
                         const std::function<bool()>& /*cancelled*/) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto failure = Begin(Verb::kWatch, type, ns, "")) {
    return Fail(std::move(*failure));
  }
  return Fail(ErrorCode::kUnavailable, "watch is not supported by FakeClient");
}

FakeClient::Json FakeClient::Put(const kube::ResourceType& type, Json object) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string ns = type.namespaced ? NamespaceOf(object) : "";
  if (type.namespaced && ns.empty()) {
    ns = "default";
  }
  const Key key{std::string(type.resource), ns, NameOf(object)};
  // Put always counts as a change, even when the content is the same.
  objects_.erase(key);
  MetadataOf(object).erase("resourceVersion");
  return Store(key, type, std::move(object));
}

bool FakeClient::Remove(const kube::ResourceType& type, std::string_view ns,
                        std::string_view name) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool removed =
      objects_.erase({std::string(type.resource), type.namespaced ? std::string(ns) : "",
                      std::string(name)}) != 0;
  if (removed) {
    ++resource_version_;
  }
  return removed;
}

std::optional<FakeClient::Json> FakeClient::Object(const kube::ResourceType& type,
                                                   std::string_view ns,
                                                   std::string_view name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = objects_.find(
      {std::string(type.resource), type.namespaced ? std::string(ns) : "", std::string(name)});
  if (it == objects_.end()) {
    return std::nullopt;
  }
  return it->second;
}

void FakeClient::InjectFailure(Verb verb, const kube::ResourceType& type, Error error, int count) {
  if (count <= 0) {
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  injections_.push_back({verb, std::string(type.resource), std::move(error), count});
}

std::vector<FakeRequest> FakeClient::Requests() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return requests_;
}

int FakeClient::WriteCount() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(std::count_if(requests_.begin(), requests_.end(),
                                        [](const FakeRequest& r) { return IsWrite(r.verb); }));
}

int FakeClient::ReadCount() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(std::count_if(
      requests_.begin(), requests_.end(),
      [](const FakeRequest& r) { return r.verb == Verb::kGet || r.verb == Verb::kList; }));
}

int FakeClient::CountOf(Verb verb, const kube::ResourceType& type, std::string_view name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(
      std::count_if(requests_.begin(), requests_.end(), [&](const FakeRequest& r) {
        return r.verb == verb && r.resource == type.resource && (name.empty() || r.name == name);
      }));
}

void FakeClient::ClearRequests() {
  std::lock_guard<std::mutex> lock(mutex_);
  requests_.clear();
}

std::uint64_t FakeClient::resource_version() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return resource_version_;
}

}  // namespace certctl::testing
