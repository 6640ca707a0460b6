#pragma once

#include <chrono>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "certctl/kube/transport.h"
#include "certctl/util/result.h"

namespace certctl::kube {

// The code a caller acts on for an HTTP status and a metav1.Status reason. `http_status` 0
// (a Status object without a code) maps by reason alone.
ErrorCode ErrorCodeForStatus(int http_status, std::string_view reason);

// The integer-seconds Retry-After header of `response`, if it has one. HTTP dates are ignored,
// as client-go ignores them.
std::optional<std::chrono::seconds> RetryAfterHeader(const HttpResponse& response);

// Maps a metav1.Status object, as found in an ERROR watch event, the way ErrorFromResponse
// maps an error response: {"code": 410, "reason": "Expired"} is kExpired, and so on.
Error ErrorFromStatus(const nlohmann::json& status, std::string_view what);

}  // namespace certctl::kube
