#include "kube/token_source.h"

#include "certctl/util/file.h"

#include "kube/exec_credential.h"

namespace certctl::kube {
namespace {

std::string TrimWhitespace(std::string text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) {
    return {};
  }
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

}  // namespace

TokenSource::TokenSource(const ClusterConfig& config, const Clock& clock)
    : static_token_(config.token),
      token_file_(config.token_file),
      exec_(config.exec),
      clock_(clock) {}

Result<std::string> TokenSource::Token() {
  std::lock_guard<std::mutex> lock(mutex_);
  const TimePoint now = clock_.Now();
  if (exec_) {
    return FromExec(now);
  }
  if (!token_file_.empty()) {
    return FromFile(now);
  }
  return static_token_;
}

bool TokenSource::Invalidate() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!exec_ && token_file_.empty()) {
    return false;
  }
  stale_ = true;
  return true;
}

Result<std::string> TokenSource::FromFile(TimePoint now) {
  const bool fresh = !stale_ && fetched_at_ && now >= *fetched_at_ &&
                     now - *fetched_at_ < kTokenFileMaxAge && !cached_.empty();
  if (fresh) {
    return cached_;
  }
  auto content = ReadFile(token_file_);
  std::string token = content ? TrimWhitespace(std::move(*content)) : std::string();
  if (!token.empty()) {
    cached_ = std::move(token);
    fetched_at_ = now;
    stale_ = false;
    return cached_;
  }
  // A kubeconfig may set both token and tokenFile; the file wins only when it is readable.
  if (!static_token_.empty()) {
    return static_token_;
  }
  // Keep using the last good token rather than failing every request while the kubelet swaps
  // the file; the server will say when it is no longer good.
  if (!cached_.empty()) {
    return cached_;
  }
  if (!content) {
    return Fail(ErrorCode::kUnauthenticated, "bearer token file: " + content.error().message());
  }
  return Fail(ErrorCode::kUnauthenticated, "bearer token file " + token_file_ + " is empty");
}

Result<std::string> TokenSource::FromExec(TimePoint now) {
  const bool fresh = !stale_ && !cached_.empty() && (!expiry_ || now < *expiry_);
  if (fresh) {
    return cached_;
  }
  auto credential = RunExecPlugin(*exec_);
  if (!credential) {
    return Fail(credential.error());
  }
  cached_ = std::move(credential->token);
  expiry_ = credential->expiry;
  fetched_at_ = now;
  stale_ = false;
  return cached_;
}

}  // namespace certctl::kube
