#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include "certctl/kube/config.h"
#include "certctl/util/clock.h"
#include "certctl/util/result.h"

namespace certctl::kube {

// A token file is re-read once it is this old (client-go does the same): projected
// service-account tokens rotate on disk.
inline constexpr std::chrono::minutes kTokenFileMaxAge{1};

// The bearer token for the next request: a static token, a token file re-read when it is
// kTokenFileMaxAge old, or an exec plugin's token cached until it expires. Thread-safe.
class TokenSource {
 public:
  TokenSource(const ClusterConfig& config, const Clock& clock);

  // The token to send now; empty when the config uses no bearer token. Failures (unreadable
  // file, failing plugin) are kUnauthenticated and never contain a token.
  Result<std::string> Token();

  // Forgets the cached token after the server answered 401, so the next Token() re-reads the
  // file or re-runs the plugin. False when nothing could change (a static token or none), so
  // retrying would be pointless.
  bool Invalidate();

 private:
  Result<std::string> FromFile(TimePoint now);
  Result<std::string> FromExec(TimePoint now);

  const std::string static_token_;
  const std::string token_file_;
  const std::optional<ExecCredential> exec_;
  const Clock& clock_;

  std::mutex mutex_;
  std::string cached_;
  std::optional<TimePoint> fetched_at_;
  std::optional<TimePoint> expiry_;
  bool stale_ = false;
};

}  // namespace certctl::kube
