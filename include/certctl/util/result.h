#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <tl/expected.hpp>

namespace certctl {

// What the caller should do next, not where the error came from.
enum class ErrorCode {
  kInvalidArgument,     // bad input (flag, file, document): report, never retry
  kNotFound,            // the object or file does not exist
  kAlreadyExists,       // create raced with another writer: re-read
  kConflict,            // optimistic-concurrency conflict: re-read and re-apply
  kUnavailable,         // transient (429, 5xx, timeout, refused): back off and retry
  kExpired,             // watch history compacted (410): re-list
  kUnauthenticated,     // credentials missing or rejected
  kPermissionDenied,    // credentials valid but not allowed
  kFailedPrecondition,  // state that a retry will not fix (wrong Secret type, ...)
  kDeadlineExceeded,    // our own timeout ran out
  kBadResponse,         // the server's answer is unusable (oversized, malformed, wrong types,
                        // another object than asked for): report, never retry
  kIo,                  // local file system failure
  kInternal,            // a library failed in a way that is not the input's fault
};

std::string_view ErrorCodeName(ErrorCode code);

class Error {
 public:
  Error(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Same code, message prefixed with "context: ".
  Error Wrap(std::string_view context) const;

  // How long the server asked us to wait before retrying (HTTP Retry-After), if it did.
  const std::optional<std::chrono::seconds>& retry_after() const { return retry_after_; }
  Error& set_retry_after(std::chrono::seconds delay) {
    retry_after_ = delay;
    return *this;
  }

 private:
  ErrorCode code_;
  std::string message_;
  std::optional<std::chrono::seconds> retry_after_;
};

template <typename T>
using Result = tl::expected<T, Error>;
using Status = Result<void>;

inline tl::unexpected<Error> Fail(ErrorCode code, std::string message) {
  return tl::unexpected<Error>(Error(code, std::move(message)));
}

inline tl::unexpected<Error> Fail(Error error) { return tl::unexpected<Error>(std::move(error)); }

}  // namespace certctl
