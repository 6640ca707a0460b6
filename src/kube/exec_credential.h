#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "certctl/kube/config.h"
#include "certctl/util/clock.h"
#include "certctl/util/result.h"

namespace certctl::kube {

// What a kubeconfig exec plugin handed back.
struct ExecToken {
  std::string token;
  std::optional<TimePoint> expiry;  // none: valid until the server rejects it
};

// A plugin that prints nothing for this long is killed.
inline constexpr std::chrono::seconds kExecPluginTimeout{60};

// Runs the plugin (posix_spawn, stdin from /dev/null, its stderr to ours) with
// KUBERNETES_EXEC_INFO set, and reads the ExecCredential it prints. Failures are
// kUnauthenticated and name the command; they never quote the plugin's output.
Result<ExecToken> RunExecPlugin(const ExecCredential& exec);

// Parses the ExecCredential JSON a plugin printed.
Result<ExecToken> ParseExecCredential(std::string_view output, const ExecCredential& exec);

}  // namespace certctl::kube
