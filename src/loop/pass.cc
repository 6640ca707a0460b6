#include "certctl/loop/pass.h"

#include <algorithm>

#include "certctl/certdir/cert_dir.h"
#include "certctl/controller/callable.h"
#include "certctl/controller/inject.h"
#include "certctl/controller/name_request.h"
#include "certctl/controller/other_callers.h"
#include "certctl/controller/rotation.h"
#include "certctl/controller/secret.h"
#include "certctl/controller/targets.h"
#include "certctl/pki/validate.h"
#include "certctl/util/duration.h"
#include "certctl/util/finding.h"
#include "certctl/util/text.h"

namespace certctl::loop {
namespace {

void RecordExpiry(const pki::ValidationReport& validation, PassReport& report) {
  if (validation.leaf) {
    report.leaf_not_before = validation.leaf->not_before;
    report.leaf_not_after = validation.leaf->not_after;
  }
  if (validation.issuer_index && *validation.issuer_index < validation.ca.size()) {
    report.ca_not_before = validation.ca[*validation.issuer_index].not_before;
    report.ca_not_after = validation.ca[*validation.issuer_index].not_after;
  }
}

// Why the set the folder holds would fail the API server's checks, trusting `ca_bundle`
// (due for renewal aside); nothing when it still serves.
std::optional<std::string> StaleSetUnusable(const PassConfig& config, const std::string& ca_bundle,
                                            TimePoint now) {
  auto files = certdir::ReadServingFiles(config.cert_dir);
  if (!files) {
    return files.error().message();
  }
  if (!*files) {
    return config.cert_dir.string() + " holds no set";
  }
  pki::PairSource source;
  source.ca_pem = ca_bundle;
  source.cert_pem = (*files)->tls_crt;
  source.key_pem = (*files)->tls_key;
  source.cert_label = (config.cert_dir / "tls.crt").string();
  source.key_label = (config.cert_dir / "tls.key").string();
  const pki::ValidationReport validation =
      pki::Validate(source, controller::PolicyFor(config.secret), now);
  for (const pki::PartFinding& entry : validation.findings) {
    if (entry.finding.code != FindingCode::kExpiringSoon) {
      return entry.finding.object + ": " + entry.finding.message;
    }
  }
  return std::nullopt;
}

// A folder that cannot be written (a read-only mount, a full disk) leaves the webhook serving
// the set it holds: while that set passes the checks against the Secret's CA bundle, the
// pass goes on (report.folder_stale says why) instead of taking the pod out of its Service.
Status PublishFolder(const PassConfig& config, const std::string& tls_crt,
                     const std::string& tls_key, const std::string& ca_crt, const Clock& clock,
                     PassReport& report) {
  if (config.cert_dir.empty()) {
    return {};
  }
  auto published =
      certdir::PublishServingFiles(config.cert_dir, {tls_crt, tls_key, ca_crt}, clock.Now());
  if (!published) {
    if (auto unusable = StaleSetUnusable(config, ca_crt, clock.Now()); unusable) {
      return Fail(published.error().code(),
                  published.error().message() + "; the set it holds does not serve: " + *unusable);
    }
    report.folder_stale = published.error().message();
    return {};
  }
  report.folder_written = report.folder_written || *published == certdir::Publish::kReplaced;
  return {};
}

// Readiness of a pass whose certificate is in place but whose targets are not all
// injected: the serving check trusts what the leader is putting into them.
void NotInjected(PassReport& report, std::string why, const std::string& ca_bundle) {
  report.ready = true;
  report.injected = false;
  report.not_injected = std::move(why);
  report.target_bundles = {ca_bundle};
}

void RecordRotation(const controller::RotationState& rotation, PassReport& report) {
  report.rotation = rotation.phase;
  report.next_step_at = rotation.phase == controller::RotationPhase::kOverlapping
                            ? rotation.previous_ca_until
                            : std::nullopt;
}

void RecordOutcome(const controller::SecretOutcome& outcome, PassReport& report) {
  if (outcome.action != controller::SecretAction::kNone) {
    std::string reason = outcome.reason;
    if (!outcome.names_dropped.empty()) {
      reason += "; it no longer names " + JoinWithCommas(outcome.names_dropped) +
                ", which whoever calls them now fails to verify";
    }
    report.secret_changes.push_back({outcome.action, std::move(reason), outcome.uid});
    report.other_callers.insert(report.other_callers.end(), outcome.other_callers.found.begin(),
                                outcome.other_callers.found.end());
    if (outcome.other_callers.not_looked) {
      report.other_callers_not_looked = outcome.other_callers.not_looked;
    }
  }
  if (!outcome.stored_data.empty()) {
    report.secret_data = outcome.stored_data;
  }
  report.conflict = outcome.conflict;
  report.secret_managed = outcome.managed;
  if (!outcome.uid.empty()) {
    report.secret_uid = outcome.uid;
  }
  RecordExpiry(outcome.validation, report);
  RecordRotation(outcome.rotation, report);
  report.rotation_problems.insert(report.rotation_problems.end(), outcome.rotation_problems.begin(),
                                  outcome.rotation_problems.end());
}

// The bundle into every target, without waiting: a missing target is "not ready" (its
// appearance triggers the next pass), not a failure.
Result<std::optional<controller::InjectOutcome>> InjectNow(kube::Client& client,
                                                           const PassConfig& config,
                                                           const std::string& bundle,
                                                           const Clock& clock, PassReport& report) {
  controller::InjectOptions no_wait;
  no_wait.wait_for_targets = std::chrono::seconds(0);
  no_wait.hold_back = config.hold_back;
  auto injected = controller::InjectBundle(client, config.targets, bundle, no_wait, clock);
  if (!injected) {
    if (injected.error().code() == ErrorCode::kNotFound) {
      NotInjected(report, "waiting for targets: " + injected.error().message(), bundle);
      return std::optional<controller::InjectOutcome>();
    }
    return Fail(injected.error());
  }
  report.patched.insert(report.patched.end(), injected->patched.begin(), injected->patched.end());
  report.patched_references.insert(report.patched_references.end(),
                                   injected->patched_references.begin(),
                                   injected->patched_references.end());
  report.held_back.insert(report.held_back.end(), injected->held_back.begin(),
                          injected->held_back.end());
  return std::optional<controller::InjectOutcome>(std::move(*injected));
}

// A step failed after the pass wrote something: the report keeps what was written (for the
// log, the metrics and the Events) and carries the failure.
Result<PassReport> FailedAfterWrites(PassReport report, const Error& error) {
  if (report.secret_changes.empty() && report.patched.empty()) {
    return Fail(error);
  }
  report.ready = false;
  report.failure = error;
  return report;
}

Result<PassReport> LeaderPass(kube::Client& client, const PassConfig& config, const Clock& clock) {
  PassReport report;
  const controller::CalledHosts called_hosts = [&] {
    return controller::CalledHostsOfTargets(client, config.targets);
  };
  const controller::OtherCallersOf other_callers = [&](const std::vector<std::string>& dropped,
                                                       const std::string& ca_bundle) {
    return controller::FindOtherCallers(client, config.targets, dropped, ca_bundle);
  };
  auto secret = controller::EnsureSecret(
      client, config.secret, clock,
      [&] { return controller::BundlesOfTargets(client, config.targets); }, config.secret_hold_back,
      called_hosts, other_callers);
  if (!secret) {
    return Fail(secret.error());
  }
  RecordOutcome(*secret, report);
  if (secret->held_back) {
    const std::string object = controller::SecretObjectName(config.secret.ns, config.secret.name);
    report.held_back.push_back(object);
    report.not_ready =
        "another writer keeps changing " + object + "; its repair (" + secret->reason + ") waits";
    return report;
  }
  if (auto published =
          PublishFolder(config, secret->tls_crt, secret->tls_key, secret->ca_bundle, clock, report);
      !published) {
    return FailedAfterWrites(std::move(report), published.error());
  }
  report.injected_bundle = secret->ca_bundle;
  auto injected = InjectNow(client, config, secret->ca_bundle, clock, report);
  if (!injected || !*injected) {
    return injected ? Result<PassReport>(std::move(report))
                    : FailedAfterWrites(std::move(report), injected.error());
  }
  if (secret->validation.leaf) {
    report.call_findings = controller::CallFindings((*injected)->targets, *secret->validation.leaf);
  }
  report.targets = std::move((*injected)->targets);
  if (!report.held_back.empty()) {
    NotInjected(report,
                "another writer keeps changing the caBundle of " +
                    JoinWithCommas(report.held_back) + "; its next repair waits",
                secret->ca_bundle);
    return report;
  }
  // A rotation of a pair this replica yielded to is its issuer's to continue.
  const bool yielding = secret->conflict && secret->conflict->yielding;
  if (secret->rotation.phase == controller::RotationPhase::kTrusting && !yielding) {
    // Step 2 only once every target reads back the new bundle: a second look, which must find
    // nothing left to write.
    auto confirmed = InjectNow(client, config, secret->ca_bundle, clock, report);
    if (!confirmed || !*confirmed) {
      return confirmed ? Result<PassReport>(std::move(report))
                       : FailedAfterWrites(std::move(report), confirmed.error());
    }
    if ((*confirmed)->patched_objects > 0) {
      NotInjected(report, "waiting for the targets to keep the new CA bundle", secret->ca_bundle);
      return report;
    }
    const TimePoint held_since =
        config.bundle_held_since
            ? config.bundle_held_since(secret->ca_bundle, (*injected)->patched_objects > 0)
            : clock.Now();
    if (const TimePoint due = held_since + controller::kBundlePropagation; clock.Now() < due) {
      // Every target trusts both CAs and the leaf is still the previous CA's: all is served
      // as it should be while the API servers' caches catch up.
      report.next_step_at = due;
      report.target_bundles = {secret->ca_bundle};
      report.ready = true;
      report.injected = true;
      return report;
    }
    auto moved =
        controller::MoveLeafToNewCa(client, config.secret, secret->ca_bundle, clock, called_hosts);
    if (!moved) {
      return FailedAfterWrites(std::move(report), moved.error());
    }
    RecordOutcome(*moved, report);
    if (moved->action != controller::SecretAction::kLeafMovedToNewCa) {
      // Another writer went on or started over: its write triggers the next pass.
      report.not_ready = "the CA rotation changed under us; reconciling again";
      return report;
    }
    if (auto published =
            PublishFolder(config, moved->tls_crt, moved->tls_key, moved->ca_bundle, clock, report);
        !published) {
      return FailedAfterWrites(std::move(report), published.error());
    }
  }
  // InjectBundle succeeds only once every caBundle field equals this bundle, as read or as
  // the server answered the patch.
  report.target_bundles = {secret->ca_bundle};
  report.ready = true;
  report.injected = true;
  return report;
}

// A name only this replica's flags add, in a rolling update that changes --service or
// --dns-name, is one the leader (an older replica) lacks: this replica asks for it in the
// Secret (name_request.h) and waits, not ready, until the leader issues it, so that a
// completed rollout means every replica serves its own names. A leader that does not read
// requests (an older certctl) never issues it, and a rollout waiting for this replica would
// never finish: past kNameRequestGrace the pair is served as it is, unless a target calls the
// name (judged afterwards, as the API server would meet it). True when the pass ends here.
Result<bool> AwaitRequestedNames(kube::Client& client, const PassConfig& config,
                                 const controller::StoredSecret& secret, const Clock& clock,
                                 PassReport& report) {
  if (!secret.pair.managed || !secret.validation.leaf) {
    return false;  // nobody issues into a Secret certctl does not manage
  }
  const std::vector<std::string> missing =
      controller::NamesNotCovered(config.secret.identity, *secret.validation.leaf);
  if (missing.empty()) {
    return false;
  }
  std::optional<controller::NameRequest> request = secret.name_request;
  const bool asked = request && std::all_of(missing.begin(), missing.end(), [&](const auto& name) {
                       return std::find(request->names.begin(), request->names.end(), name) !=
                              request->names.end();
                     });
  if (!asked) {
    auto written = controller::RequestNames(client, config.secret.ns, config.secret.name, missing,
                                            clock.Now());
    if (!written) {
      return Fail(written.error());
    }
    request = std::move(*written);
  }
  const TimePoint until = request->at + controller::kNameRequestGrace;
  if (clock.Now() >= until) {
    return false;
  }
  report.not_ready = "waiting for the leader to issue " + JoinWithCommas(missing) +
                     ", asked for in " +
                     controller::SecretObjectName(config.secret.ns, config.secret.name) + " at " +
                     FormatRfc3339(request->at);
  report.next_step_at = until;
  return true;
}

Result<PassReport> FollowerPass(kube::Client& client, const PassConfig& config,
                                const Clock& clock) {
  PassReport report;
  const std::string object = controller::SecretObjectName(config.secret.ns, config.secret.name);
  auto stored = controller::ReadStoredSecret(client, config.secret.ns, config.secret.name,
                                             controller::PolicyFor(config.secret),
                                             config.secret.ca_overlap, clock.Now());
  if (!stored) {
    return Fail(stored.error());
  }
  if (!stored->has_value()) {
    report.not_ready = "waiting for the leader to create " + object;
    return report;
  }
  const controller::StoredSecret& secret = **stored;
  RecordExpiry(secret.validation, report);
  RecordRotation(secret.rotation, report);
  report.rotation_problems = secret.rotation_problems;
  // Due for renewal, the pair still serves: renewing it is the leader's, and leaving the
  // Service meanwhile (no leader for a lease's length, say) would fail calls it answers.
  // A name only this replica's flags add is the leader's to issue too (AwaitRequestedNames).
  std::vector<Finding> names_awaited;
  std::vector<Finding> to_repair;
  for (const Finding& finding : secret.findings) {
    if (finding.code == FindingCode::kSanMissing) {
      names_awaited.push_back(finding);
    } else if (finding.code != FindingCode::kExpiringSoon) {
      to_repair.push_back(finding);
    }
  }
  if (!to_repair.empty()) {
    report.not_ready =
        "waiting for the leader to repair " + object + ": " + JoinFindings(secret.findings);
    return report;
  }
  if (!names_awaited.empty()) {
    auto waiting = AwaitRequestedNames(client, config, secret, clock, report);
    if (!waiting) {
      return Fail(waiting.error());
    }
    if (*waiting) {
      return report;
    }
    report.names_awaited = JoinFindings(names_awaited) +
                           "; the leader has not issued them, this replica will once it leads";
  }
  const pki::PairSource& pair = secret.pair.source;
  if (auto published =
          PublishFolder(config, *pair.cert_pem, *pair.key_pem, *pair.ca_pem, clock, report);
      !published) {
    return Fail(published.error());
  }
  controller::CheckReport check;
  check.source = object;
  check.validation = secret.validation;
  if (auto checked = controller::CheckTargets(client, config.targets, check); !checked) {
    return Fail(checked.error());
  }
  report.call_findings = std::move(check.call_findings);
  if (!check.other_findings.empty()) {
    NotInjected(
        report,
        "waiting for the leader to inject the bundle: " + JoinFindings(check.other_findings),
        *pair.ca_pem);
    return report;
  }
  for (const controller::TargetStatus& target : check.targets) {
    if (std::find(report.target_bundles.begin(), report.target_bundles.end(), target.bundle) ==
        report.target_bundles.end()) {
      report.target_bundles.push_back(target.bundle);
    }
  }
  if (report.target_bundles.empty()) {
    report.target_bundles = {*pair.ca_pem};  // no targets: what the Secret says to trust
  }
  report.ready = true;
  report.injected = true;
  return report;
}

}  // namespace

TimePoint BundleHold::Since(const std::string& bundle, bool written, TimePoint now) {
  if (written || bundle != bundle_) {
    bundle_ = bundle;
    since_ = now;
  }
  return since_;
}

Result<PassReport> Reconcile(kube::Client& client, const PassConfig& config, Role role,
                             const Clock& clock) {
  return role == Role::kLeader ? LeaderPass(client, config, clock)
                               : FollowerPass(client, config, clock);
}

}  // namespace certctl::loop
