#include "certctl/util/result.h"

namespace certctl {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid-argument";
    case ErrorCode::kNotFound:
      return "not-found";
    case ErrorCode::kAlreadyExists:
      return "already-exists";
    case ErrorCode::kConflict:
      return "conflict";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kExpired:
      return "expired";
    case ErrorCode::kUnauthenticated:
      return "unauthenticated";
    case ErrorCode::kPermissionDenied:
      return "permission-denied";
    case ErrorCode::kFailedPrecondition:
      return "failed-precondition";
    case ErrorCode::kDeadlineExceeded:
      return "deadline-exceeded";
    case ErrorCode::kBadResponse:
      return "bad-response";
    case ErrorCode::kIo:
      return "io";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "unknown";
}

Error Error::Wrap(std::string_view context) const {
  std::string message(context);
  message += ": ";
  message += message_;
  Error wrapped(code_, std::move(message));
  wrapped.retry_after_ = retry_after_;
  return wrapped;
}

}  // namespace certctl
