#include "certctl/controller/converge.h"

#include "certctl/controller/other_callers.h"
#include "certctl/controller/secret.h"
#include "certctl/controller/targets.h"
#include "certctl/util/finding.h"

namespace certctl::controller {
namespace {

// Targets that keep losing the bundle between two looks (another writer fighting over it)
// end the run instead of holding the rotation forever.
constexpr int kMaxConfirmations = 5;

// The Secret as stored, for a run that must not write it: it must hold a valid pair.
Result<SecretOutcome> Stored(kube::Client& client, const SecretSpec& spec, const Clock& clock) {
  const std::string object = SecretObjectName(spec.ns, spec.name);
  auto stored =
      ReadStoredSecret(client, spec.ns, spec.name, PolicyFor(spec), spec.ca_overlap, clock.Now());
  if (!stored) {
    return Fail(stored.error());
  }
  if (!stored->has_value()) {
    return Fail(ErrorCode::kNotFound, object + " does not exist; run the secret phase first");
  }
  StoredSecret& secret = **stored;
  if (!secret.findings.empty()) {
    return Fail(ErrorCode::kFailedPrecondition, object + " does not hold a valid pair (" +
                                                    JoinFindings(secret.findings) +
                                                    "); run the secret phase first");
  }
  SecretOutcome outcome;
  outcome.managed = secret.pair.managed;
  outcome.ca_bundle = *secret.pair.source.ca_pem;
  outcome.tls_crt = *secret.pair.source.cert_pem;
  outcome.tls_key = *secret.pair.source.key_pem;
  outcome.validation = std::move(secret.validation);
  outcome.rotation = secret.rotation;
  return outcome;
}

}  // namespace

Result<SecretOutcome> Converge(kube::Client& client, const SecretSpec& spec,
                               const TargetSelection& targets, const ConvergeOptions& options,
                               const Clock& clock) {
  const KnownBundles known_bundles = [&] { return BundlesOfTargets(client, targets); };
  const CalledHosts called_hosts = [&] { return CalledHostsOfTargets(client, targets); };
  const OtherCallersOf other_callers = [&](const std::vector<std::string>& dropped,
                                           const std::string& ca_bundle) {
    return FindOtherCallers(client, targets, dropped, ca_bundle);
  };
  auto outcome = options.ensure_secret ? EnsureSecret(client, spec, clock, known_bundles, {},
                                                      called_hosts, other_callers)
                                       : Stored(client, spec, clock);
  if (!outcome) {
    return Fail(outcome.error());
  }
  if (options.ensure_secret && options.on_secret) {
    options.on_secret(*outcome);
  }
  if (options.ensure_secret && outcome->action == SecretAction::kAdopted) {
    // Adopting only labels the Secret; what the now managed Secret needs (a CA of its own
    // when it came without ca.key) is the next look's.
    outcome = EnsureSecret(client, spec, clock, known_bundles, {}, called_hosts, other_callers);
    if (!outcome) {
      return Fail(outcome.error());
    }
    if (outcome->action != SecretAction::kNone && options.on_secret) {
      options.on_secret(*outcome);
    }
  }
  const bool trusting = outcome->rotation.phase == RotationPhase::kTrusting;
  if (!options.inject && !(trusting && !targets.empty())) {
    return outcome;
  }
  // The secret phase carries a rotation only over the targets that exist: one an upgrade
  // adds or renames is created after the pre-upgrade hook, and waiting for it there would
  // fail the upgrade. The leaf then stays with the previous CA for the inject phase to move.
  InjectOptions inject_options = options.inject_options;
  inject_options.leave_out_missing = !options.inject;
  const auto inject = [&]() -> Result<InjectOutcome> {
    auto injected = InjectBundle(client, targets, outcome->ca_bundle, inject_options, clock);
    if (injected && options.on_inject) {
      options.on_inject(*injected);
    }
    return injected;
  };
  auto injected = inject();
  if (!injected) {
    return Fail(injected.error());
  }
  if (!trusting || targets.empty() || !injected->missing.empty()) {
    return outcome;
  }
  // Step 2 once two looks kBundlePropagation apart found nothing to write: the second look
  // shows the targets kept the bundle while the API servers' caches caught up.
  bool settled = false;
  for (int look = 0;; ++look) {
    auto confirmed = inject();
    if (!confirmed) {
      return Fail(confirmed.error());
    }
    if (!confirmed->missing.empty()) {
      return outcome;  // a target was deleted meanwhile: the inject phase judges again
    }
    if (confirmed->patched_objects == 0) {
      if (settled) {
        break;
      }
      clock.Sleep(kBundlePropagation);
      settled = true;
      continue;
    }
    settled = false;
    if (look + 1 == kMaxConfirmations) {
      return Fail(ErrorCode::kConflict,
                  "the targets kept losing the new CA bundle while a CA rotation waited for "
                  "them; the leaf stays with the previous CA");
    }
  }
  auto moved = MoveLeafToNewCa(client, spec, outcome->ca_bundle, clock, called_hosts);
  if (!moved) {
    return Fail(moved.error());
  }
  // kNone: another writer (a controller, a concurrent run) took the step, or started over;
  // the outcome says what is stored.
  if (moved->action != SecretAction::kNone && options.on_secret) {
    options.on_secret(*moved);
  }
  return moved;
}

}  // namespace certctl::controller
