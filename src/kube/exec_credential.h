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

// The whole exchange with a plugin (start, output, exit) must end within this.
inline constexpr std::chrono::milliseconds kExecPluginTimeout{std::chrono::seconds(60)};

// Runs the plugin (posix_spawn, stdin from /dev/null, its stderr to ours) with
// KUBERNETES_EXEC_INFO set, and reads the ExecCredential it prints: its answer is what it
// printed by the time it exited, even while a helper it started holds its output open. The
// plugin runs in a process group of its own: when it fails or outlives `timeout` (which
// covers the wait for its exit too), or when it exited while something it started still holds
// its output, the whole group is killed, so helpers it started cannot outlive it.
// Failures are kUnauthenticated and name the command; they never quote the plugin's output.
Result<ExecToken> RunExecPlugin(const ExecCredential& exec,
                                std::chrono::milliseconds timeout = kExecPluginTimeout);

// Parses the ExecCredential JSON a plugin printed.
Result<ExecToken> ParseExecCredential(std::string_view output, const ExecCredential& exec);

}  // namespace certctl::kube
