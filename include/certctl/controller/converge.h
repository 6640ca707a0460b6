#pragma once

#include <functional>
#include <string>

#include "certctl/controller/check.h"
#include "certctl/controller/ensure_secret.h"
#include "certctl/controller/inject.h"
#include "certctl/kube/client.h"
#include "certctl/util/clock.h"
#include "certctl/util/result.h"

namespace certctl::controller {

// What a one-shot run (`certctl job`, `certctl rotate` without a controller) does, waiting
// where the sidecar would wait for the next event instead.
struct ConvergeOptions {
  // Ensure the Secret (EnsureSecret); false: it must already hold a valid pair.
  bool ensure_secret = true;
  // Inject the bundle into every target. Even when false, a CA rotation waiting for its
  // targets gets its bundle injected there when targets are given, so the leaf can move.
  bool inject = true;
  InjectOptions inject_options;
  // Told what ensuring the Secret did (kNone included), then about every later write (the
  // steps of a rotation), as they happen.
  std::function<void(const SecretOutcome&)> on_secret;
  // Told about every injection round.
  std::function<void(const InjectOutcome&)> on_inject;
};

// Ensures the Secret, injects its bundle, and carries a CA rotation that waits for its
// targets through step 2 once every target reads the new bundle back (a second look that
// finds nothing left to write). Returns what the Secret holds in the end. Without targets (or
// with inject false and none given), a rotation stops after step 1, trusted by nobody
// yet but serving the leaf of the CA everyone trusts. With inject false, targets that do not
// exist are not waited for: the others get the bundle and the rotation stops after step 1.
Result<SecretOutcome> Converge(kube::Client& client, const SecretSpec& spec,
                               const TargetSelection& targets, const ConvergeOptions& options,
                               const Clock& clock);

}  // namespace certctl::controller
