#include "kube/errors.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "certctl/kube/client.h"
#include "certctl/util/text.h"

namespace certctl::kube {
namespace {

// Messages and reasons come from the server and end up on a terminal or in a log line: printable,
// one line, and short enough that one bad answer cannot flood either. Bodies that are not a
// Status (the APF 429, a load balancer's HTML page) are quoted shorter still.
constexpr std::size_t kMaxMessage = 400;
constexpr std::size_t kMaxTextMessage = 200;

std::string Prefixed(std::string_view what, std::string_view message) {
  if (what.empty()) {
    return std::string(message);
  }
  std::string result(what);
  result += ": ";
  result += message;
  return result;
}

// object[key] when it is a string, made printable and clipped.
std::string StringField(const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string()
             ? OneLine(it->get_ref<const std::string&>(), kMaxMessage)
             : std::string();
}

std::optional<std::chrono::seconds> DetailsRetryAfter(const nlohmann::json& status) {
  const auto details = status.find("details");
  if (details == status.end() || !details->is_object()) {
    return std::nullopt;
  }
  const auto seconds = details->find("retryAfterSeconds");
  if (seconds == details->end() || !seconds->is_number_integer() || seconds->get<long>() < 0) {
    return std::nullopt;
  }
  return std::chrono::seconds(seconds->get<long>());
}

bool IsStatus(const nlohmann::json& body) {
  return body.is_object() && (StringField(body, "kind") == "Status" || body.contains("reason") ||
                              body.contains("message"));
}

}  // namespace

ErrorCode ErrorCodeForStatus(int http_status, std::string_view reason) {
  switch (http_status) {
    case 400:
    case 422:
      return ErrorCode::kInvalidArgument;
    case 401:
      return ErrorCode::kUnauthenticated;
    case 403:
      return ErrorCode::kPermissionDenied;
    case 404:
      return ErrorCode::kNotFound;
    case 409:
      return reason == "AlreadyExists" ? ErrorCode::kAlreadyExists : ErrorCode::kConflict;
    case 410:
      return ErrorCode::kExpired;
    case 429:
      return ErrorCode::kUnavailable;
    case 0:
      break;
    default:
      return http_status >= 500 ? ErrorCode::kUnavailable : ErrorCode::kInternal;
  }
  // No code: the reason alone (metav1.StatusReason values).
  if (reason == "BadRequest" || reason == "Invalid") {
    return ErrorCode::kInvalidArgument;
  }
  if (reason == "Unauthorized") {
    return ErrorCode::kUnauthenticated;
  }
  if (reason == "Forbidden") {
    return ErrorCode::kPermissionDenied;
  }
  if (reason == "NotFound") {
    return ErrorCode::kNotFound;
  }
  if (reason == "AlreadyExists") {
    return ErrorCode::kAlreadyExists;
  }
  if (reason == "Conflict") {
    return ErrorCode::kConflict;
  }
  if (reason == "Expired" || reason == "Gone") {
    return ErrorCode::kExpired;
  }
  if (reason == "TooManyRequests" || reason == "ServerTimeout" || reason == "Timeout" ||
      reason == "ServiceUnavailable" || reason == "InternalError") {
    return ErrorCode::kUnavailable;
  }
  return ErrorCode::kInternal;
}

std::optional<std::chrono::seconds> RetryAfterHeader(const HttpResponse& response) {
  const auto it = response.headers.find("retry-after");
  if (it == response.headers.end()) {
    return std::nullopt;
  }
  std::string_view value = it->second;
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front())) != 0) {
    value.remove_prefix(1);
  }
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back())) != 0) {
    value.remove_suffix(1);
  }
  if (value.empty() || value.size() > 9 ||
      !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::chrono::seconds(std::stol(std::string(value)));
}

Error ErrorFromStatus(const nlohmann::json& status, std::string_view what) {
  if (!status.is_object()) {
    return Error(ErrorCode::kInternal, Prefixed(what, "malformed Status object"));
  }
  int code = 0;
  if (const auto it = status.find("code"); it != status.end() && it->is_number_integer()) {
    code = it->get<int>();
  }
  const std::string reason = StringField(status, "reason");
  std::string message = StringField(status, "message");
  if (message.empty()) {
    message = !reason.empty() ? reason : "unknown error (HTTP " + std::to_string(code) + ")";
  }
  Error error(ErrorCodeForStatus(code, reason), Prefixed(what, message));
  if (const auto delay = DetailsRetryAfter(status)) {
    error.set_retry_after(*delay);
  }
  return error;
}

Error ErrorFromResponse(const HttpResponse& response, std::string_view what) {
  std::string reason;
  std::string message;
  std::optional<std::chrono::seconds> retry_after = RetryAfterHeader(response);

  const std::string_view body = response.body;
  const auto first = body.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && body[first] == '{') {
    // Never rethrown: a body that is not JSON is quoted as text below.
    const nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (IsStatus(parsed)) {
      reason = StringField(parsed, "reason");
      message = StringField(parsed, "message");
      if (message.empty()) {
        message = reason;
      }
      if (!retry_after) {
        retry_after = DetailsRetryAfter(parsed);
      }
    }
  }
  if (message.empty()) {
    message = OneLine(body, kMaxTextMessage);
  }
  if (message.empty()) {
    message = "the server answered HTTP " + std::to_string(response.status) + " with no message";
  }
  Error error(ErrorCodeForStatus(response.status, reason), Prefixed(what, message));
  if (retry_after) {
    error.set_retry_after(*retry_after);
  }
  return error;
}

}  // namespace certctl::kube
