#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "certctl/kube/client.h"
#include "certctl/util/clock.h"
#include "certctl/util/result.h"

namespace certctl::controller {

// A CA rotation goes in steps, each persisted in the Secret before the next, so that no
// server ever presents a certificate whose issuer some target does not trust yet, and so that
// a restarted controller, another leader or a later job continues where one stopped:
//  1. a new CA is generated; ca.crt = new CA + previous CA, ca.key = the new CA's key, the
//     leaf stays the one issued by the previous CA (phase "trusting"); the bundle is then
//     injected into every target until each reads back with it;
//  2. only then, and kBundlePropagation later, the leaf is re-issued from the new CA (phase
//     "overlapping");
//  3. the previous CA leaves ca.crt (and the targets) once it has expired or the overlap
//     (--ca-overlap) has passed, whichever comes first (no phase: done).
// How long step 2 waits after every target read back the two-CA bundle. The API servers
// call webhooks with the bundle from their own watch caches, which trail the write (and an
// HA control plane has one cache per API server): a leaf moved at the read-back would meet
// a cache that still holds the previous bundle alone.
inline constexpr std::chrono::seconds kBundlePropagation{3};

inline constexpr char kRotationPhaseAnnotation[] = "certctl.io/rotation-phase";
inline constexpr char kRotationStartedAnnotation[] = "certctl.io/rotation-started";
inline constexpr char kPreviousCaUntilAnnotation[] = "certctl.io/previous-ca-until";
// Set by `certctl rotate` to ask the controller (or the next job) to rotate: "ca" or "leaf".
inline constexpr char kRotateAnnotation[] = "certctl.io/rotate";

enum class RotationPhase {
  kNone,
  kTrusting,     // step 1 stored: waiting for every target to trust the new CA
  kOverlapping,  // step 2 stored: the leaf is from the new CA; the previous one still trusted
};

// "", "trusting", "overlapping": the annotation's values.
std::string_view RotationPhaseName(RotationPhase phase);

enum class RotationRequest { kNone, kCa, kLeaf };

// "", "ca", "leaf".
std::string_view RotationRequestName(RotationRequest request);

struct RotationState {
  RotationPhase phase = RotationPhase::kNone;
  std::optional<TimePoint> started;            // when step 1 was stored
  std::optional<TimePoint> previous_ca_until;  // step 3 is due then (set by step 2)
  RotationRequest requested = RotationRequest::kNone;

  bool operator==(const RotationState&) const = default;
};

// One of certctl's annotations whose value certctl does not act on as it stands.
struct RotationProblem {
  std::string annotation;  // "certctl.io/rotation-phase"
  std::string value;       // as stored
  // What is wrong and what certctl does instead, without the Secret's name:
  // "metadata.annotations[KEY] is \"VALUE\", expected ...; ignored".
  std::string message;

  bool operator==(const RotationProblem&) const = default;
};

// The value of a certctl annotation on `secret` (named `object` in messages), absent or null
// as nullopt. A value that is not a string is kBadResponse: the API server only stores
// strings, so the answer itself is broken.
Result<std::optional<std::string>> SecretAnnotation(const nlohmann::json& secret,
                                                    const std::string& object, const char* key);

// "metadata.annotations[KEY] is \"VALUE\", expected EXPECTED; ignored".
RotationProblem IgnoredAnnotation(const char* key, const std::string& value,
                                  std::string_view expected);

// The annotation's time; nullopt when absent or, told in `problems`, not RFC 3339.
Result<std::optional<TimePoint>> TimeAnnotation(const nlohmann::json& secret,
                                                const std::string& object, const char* key,
                                                std::vector<RotationProblem>& problems);

// The rotation annotations as read, and those left out of `state` because certctl never
// writes such a value (an unknown phase or request, a time that is not RFC 3339).
struct RotationReading {
  RotationState state;
  std::vector<RotationProblem> problems;
};

// The rotation annotations of `secret` (named `object` in messages), each value certctl never
// writes left out of the state and told in `problems`. A value that is not a string is
// kBadResponse: the API server only stores strings, so the answer itself is broken.
Result<RotationReading> ReadRotationAnnotations(const nlohmann::json& secret,
                                                const std::string& object);

// The same, strictly: a value certctl never writes is kInvalidArgument naming the annotation.
Result<RotationState> ReadRotationState(const nlohmann::json& secret, const std::string& object);

// `certctl rotate`: asks whoever reconciles the Secret next to rotate, by setting the request
// annotation (a whole-object update carrying the resourceVersion read, re-read on conflict).
// The Secret must exist (kNotFound) and be managed by certctl (kFailedPrecondition). Returns
// the Secret as stored after the request.
Result<nlohmann::json> RequestRotation(kube::Client& client, std::string_view ns,
                                       std::string_view name, RotationRequest request);

// Writes `state` into metadata.annotations: the annotations it needs are set, the others of
// certctl's removed, everyone else's kept.
void WriteRotationState(const RotationState& state, nlohmann::json& secret);

}  // namespace certctl::controller
