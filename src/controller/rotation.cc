#include "certctl/controller/rotation.h"

#include "certctl/controller/secret.h"
#include "certctl/kube/object.h"
#include "certctl/util/duration.h"
#include "certctl/util/text.h"

namespace certctl::controller {
namespace {
using Json = nlohmann::json;
}  // namespace

// Keys hold a slash, which a JSON pointer would split: looked up directly.
Result<std::optional<std::string>> SecretAnnotation(const Json& secret, const std::string& object,
                                                    const char* key) {
  auto annotations = kube::OptionalObject(secret, "/metadata/annotations", object);
  if (!annotations) {
    return Fail(annotations.error());
  }
  if (*annotations == nullptr) {
    return std::optional<std::string>();
  }
  const auto found = (*annotations)->find(key);
  if (found == (*annotations)->end() || found->is_null()) {
    return std::optional<std::string>();
  }
  if (!found->is_string()) {
    return Fail(ErrorCode::kBadResponse,
                object + ": metadata.annotations[" + key + "] is not a string");
  }
  return std::optional<std::string>(found->get<std::string>());
}

RotationProblem IgnoredAnnotation(const char* key, const std::string& value,
                                  std::string_view expected) {
  return {key, value,
          "metadata.annotations[" + std::string(key) + "] is \"" + OneLine(value, 100) +
              "\", expected " + std::string(expected) + "; ignored"};
}

Result<std::optional<TimePoint>> TimeAnnotation(const Json& secret, const std::string& object,
                                                const char* key,
                                                std::vector<RotationProblem>& problems) {
  auto text = SecretAnnotation(secret, object, key);
  if (!text) {
    return Fail(text.error());
  }
  if (!*text) {
    return std::optional<TimePoint>();
  }
  auto time = ParseRfc3339(**text);
  if (!time) {
    problems.push_back(IgnoredAnnotation(key, **text, "an RFC 3339 time"));
    return std::optional<TimePoint>();
  }
  return std::optional<TimePoint>(*time);
}

std::string_view RotationPhaseName(RotationPhase phase) {
  switch (phase) {
    case RotationPhase::kNone:
      return "";
    case RotationPhase::kTrusting:
      return "trusting";
    case RotationPhase::kOverlapping:
      return "overlapping";
  }
  return "";
}

std::string_view RotationRequestName(RotationRequest request) {
  switch (request) {
    case RotationRequest::kNone:
      return "";
    case RotationRequest::kCa:
      return "ca";
    case RotationRequest::kLeaf:
      return "leaf";
  }
  return "";
}

Result<RotationReading> ReadRotationAnnotations(const Json& secret, const std::string& object) {
  RotationReading reading;
  RotationState& state = reading.state;
  auto phase = SecretAnnotation(secret, object, kRotationPhaseAnnotation);
  if (!phase) {
    return Fail(phase.error());
  }
  if (*phase && !(*phase)->empty()) {
    if (**phase == RotationPhaseName(RotationPhase::kTrusting)) {
      state.phase = RotationPhase::kTrusting;
    } else if (**phase == RotationPhaseName(RotationPhase::kOverlapping)) {
      state.phase = RotationPhase::kOverlapping;
    } else {
      reading.problems.push_back(
          IgnoredAnnotation(kRotationPhaseAnnotation, **phase, "trusting or overlapping"));
    }
  }
  auto requested = SecretAnnotation(secret, object, kRotateAnnotation);
  if (!requested) {
    return Fail(requested.error());
  }
  if (*requested && !(*requested)->empty()) {
    if (**requested == RotationRequestName(RotationRequest::kCa)) {
      state.requested = RotationRequest::kCa;
    } else if (**requested == RotationRequestName(RotationRequest::kLeaf)) {
      state.requested = RotationRequest::kLeaf;
    } else {
      reading.problems.push_back(IgnoredAnnotation(kRotateAnnotation, **requested, "ca or leaf"));
    }
  }
  auto started = TimeAnnotation(secret, object, kRotationStartedAnnotation, reading.problems);
  if (!started) {
    return Fail(started.error());
  }
  state.started = *started;
  auto until = TimeAnnotation(secret, object, kPreviousCaUntilAnnotation, reading.problems);
  if (!until) {
    return Fail(until.error());
  }
  state.previous_ca_until = *until;
  return reading;
}

Result<RotationState> ReadRotationState(const Json& secret, const std::string& object) {
  auto reading = ReadRotationAnnotations(secret, object);
  if (!reading) {
    return Fail(reading.error());
  }
  if (!reading->problems.empty()) {
    std::string message = reading->problems.front().message;
    message.erase(message.size() - std::string_view("; ignored").size());
    return Fail(ErrorCode::kInvalidArgument, object + ": " + message);
  }
  return reading->state;
}

void WriteRotationState(const RotationState& state, Json& secret) {
  Json& metadata = secret["metadata"];
  if (!metadata.contains("annotations") || !metadata["annotations"].is_object()) {
    metadata["annotations"] = Json::object();
  }
  Json& annotations = metadata["annotations"];
  const auto set = [&](const char* key, std::string_view value) {
    if (value.empty()) {
      annotations.erase(key);
    } else {
      annotations[key] = std::string(value);
    }
  };
  set(kRotationPhaseAnnotation, RotationPhaseName(state.phase));
  set(kRotateAnnotation, RotationRequestName(state.requested));
  set(kRotationStartedAnnotation, state.started ? FormatRfc3339(*state.started) : "");
  set(kPreviousCaUntilAnnotation,
      state.previous_ca_until ? FormatRfc3339(*state.previous_ca_until) : "");
  if (annotations.empty()) {
    metadata.erase("annotations");
  }
}

Result<Json> RequestRotation(kube::Client& client, std::string_view ns, std::string_view name,
                             RotationRequest request) {
  const std::string object = SecretObjectName(ns, name);
  constexpr int kMaxAttempts = 5;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    auto current = client.Get(kube::kSecrets, ns, name);
    if (!current) {
      return Fail(current.error().Wrap("get " + object));
    }
    if (!current->has_value()) {
      return Fail(ErrorCode::kNotFound,
                  object +
                      " does not exist: there is nothing to rotate (certctl job or run "
                      "creates it)");
    }
    Json secret = std::move(**current);
    auto pair = ReadSecretPair(secret);
    if (!pair) {
      return Fail(pair.error());
    }
    if (!pair->managed) {
      return Fail(ErrorCode::kFailedPrecondition, object + " is not managed by certctl (no label " +
                                                      kManagedByLabel + "=" + kManagedByValue +
                                                      "); certctl rotates only what it manages");
    }
    // Only the request is written: whatever else the annotations hold, valid or not, is the
    // controller's to judge (and to repair) when it takes the request.
    if (auto reading = ReadRotationAnnotations(secret, object); !reading) {
      return Fail(reading.error());
    }
    Json& metadata = secret["metadata"];
    if (!metadata.contains("annotations") || !metadata["annotations"].is_object()) {
      metadata["annotations"] = Json::object();
    }
    metadata["annotations"][kRotateAnnotation] = std::string(RotationRequestName(request));
    auto updated = client.Update(kube::kSecrets, ns, name, secret);
    if (updated) {
      return std::move(*updated);
    }
    if (updated.error().code() != ErrorCode::kConflict) {
      return Fail(updated.error().Wrap("update " + object));
    }
  }
  return Fail(ErrorCode::kConflict, object + " kept changing under us; gave up after " +
                                        std::to_string(kMaxAttempts) + " attempts");
}

}  // namespace certctl::controller
