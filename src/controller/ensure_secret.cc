#include "certctl/controller/ensure_secret.h"

#include <algorithm>
#include <map>

#include "certctl/controller/rotation_check.h"
#include "certctl/controller/secret.h"
#include "certctl/kube/object.h"
#include "certctl/pki/certificate.h"
#include "certctl/pki/key.h"
#include "certctl/util/base64.h"
#include "certctl/util/safety_controls.h"
#include "certctl/util/text.h"

#include "controller/secret_plan.h"

namespace certctl::controller {
namespace {

using Json = nlohmann::json;

// Conflicts mean someone else wrote in between; a handful of fresh starts is plenty.
constexpr int kMaxConflictRestarts = 5;

}  // namespace

std::string_view SecretActionName(SecretAction action) {
  switch (action) {
    case SecretAction::kNone:
      return "none";
    case SecretAction::kCreated:
      return "created";
    case SecretAction::kLeafReissued:
      return "leaf-reissued";
    case SecretAction::kCaReplaced:
      return "ca-replaced";
    case SecretAction::kCaRotationStarted:
      return "ca-rotation-started";
    case SecretAction::kLeafMovedToNewCa:
      return "leaf-moved-to-new-ca";
    case SecretAction::kPreviousCaRetired:
      return "previous-ca-retired";
    case SecretAction::kAdopted:
      return "adopted";
    case SecretAction::kRepaired:
      return "repaired";
  }
  return "unknown";
}

pki::ValidationPolicy PolicyFor(const SecretSpec& spec) {
  pki::ValidationPolicy policy;
  if (!SafetyRemoved("names")) {
    policy.dns_names = pki::RequiredDnsNames(spec.identity);
    policy.ip_addresses = spec.identity.ip_addresses;
  }
  policy.renew_before = spec.renew_before;
  return policy;
}

namespace {

// For Events only: a uid of the wrong type just goes unused.
std::string ObjectUid(const Json& object) {
  auto uid = kube::OptionalString(object, "/metadata/uid", "secret");
  return uid && *uid ? **uid : "";
}

// The names (DNS names, then IP addresses) the server certificate `before` covered and
// `after` does not; none when `before` does not parse.
std::vector<std::string> NamesDropped(const std::optional<std::string>& before,
                                      const std::string& after) {
  if (!before) {
    return {};
  }
  auto old_leaf = pki::Certificate::FromPem(*before);
  auto new_leaf = pki::Certificate::FromPem(after);
  if (!old_leaf || !new_leaf) {
    return {};
  }
  const pki::CertificateInfo old_info = old_leaf->Info();
  const pki::CertificateInfo new_info = new_leaf->Info();
  std::vector<std::string> dropped;
  for (const auto& [old_names, new_names] :
       {std::pair{&old_info.dns_names, &new_info.dns_names},
        std::pair{&old_info.ip_addresses, &new_info.ip_addresses}}) {
    for (const std::string& name : *old_names) {
      if (std::find(new_names->begin(), new_names->end(), name) == new_names->end()) {
        dropped.push_back(name);
      }
    }
  }
  return dropped;
}

// The data of a Secret certctl just stored, for the caller's memory of what it wrote.
std::map<std::string, std::string> DataOf(const Json& secret) {
  std::map<std::string, std::string> data;
  const auto found = secret.find("data");
  if (found != secret.end() && found->is_object()) {
    for (const auto& [key, value] : found->items()) {
      if (value.is_string()) {
        data[key] = value.get<std::string>();
      }
    }
  }
  return data;
}

// `spec` with the names a follower asked for (name_request.h) added to its own; what the
// request holds that cannot be issued goes to `problems`.
Result<SecretSpec> SpecWithRequestedNames(const SecretSpec& spec, const Json& secret,
                                          const std::string& object, TimePoint now,
                                          std::vector<RotationProblem>& problems) {
  auto requested = ReadNameRequest(secret, object, now);
  if (!requested) {
    return Fail(requested.error());
  }
  problems.insert(problems.end(), requested->problems.begin(), requested->problems.end());
  SecretSpec effective = spec;
  if (requested->request) {
    effective.identity = WithRequestedNames(spec.identity, *requested->request);
  }
  return effective;
}

// The actions whose pair reflects the issuer's settings (a repair or a CA retired does not).
bool IssuesPair(SecretAction action) {
  switch (action) {
    case SecretAction::kCreated:
    case SecretAction::kLeafReissued:
    case SecretAction::kCaReplaced:
    case SecretAction::kCaRotationStarted:
    case SecretAction::kLeafMovedToNewCa:
      return true;
    default:
      return false;
  }
}

// The pair as stored, for an outcome that writes none of it.
void KeepStored(const pki::PairSource& source, pki::ValidationReport validation,
                const RotationState& rotation, SecretOutcome& outcome) {
  outcome.ca_bundle = source.ca_pem.value_or("");
  outcome.tls_crt = source.cert_pem.value_or("");
  outcome.tls_key = source.key_pem.value_or("");
  outcome.validation = std::move(validation);
  outcome.rotation = rotation;
}

// Writes `secret` whose annotations alone changed; the uid stored, or nullopt when another
// writer came first (kConflict: the caller reads again).
Result<std::optional<std::string>> UpdateAnnotations(kube::Client& client, const SecretSpec& spec,
                                                     const Json& secret,
                                                     const std::string& object) {
  auto updated = client.Update(kube::kSecrets, spec.ns, spec.name, secret);
  if (updated) {
    return std::optional<std::string>(ObjectUid(*updated));
  }
  if (updated.error().code() == ErrorCode::kConflict) {
    return std::optional<std::string>();
  }
  return Fail(updated.error().Wrap("update " + object));
}

// Why a new leaf is refused: who outside the targets still calls the names it drops.
std::string BreaksOtherCallers(const std::string& object, const std::vector<OtherCaller>& found) {
  std::vector<std::string> hosts;
  for (const OtherCaller& caller : found) {
    if (std::find(hosts.begin(), hosts.end(), caller.host) == hosts.end()) {
      hosts.push_back(caller.host);
    }
  }
  return "the new server certificate for " + object + " would drop " + JoinWithCommas(hosts) +
         ", which webhook configurations that are not targets call with this Secret's CA in "
         "their caBundle: " +
         DescribeOtherCallers(found) +
         "; nothing was written (give that webhook a Secret of its own, or pass "
         "--force-reissue to re-issue anyway)";
}

}  // namespace

Result<SecretOutcome> EnsureSecret(kube::Client& client, const SecretSpec& spec, const Clock& clock,
                                   const KnownBundles& known_bundles,
                                   const SecretHoldBack& hold_back, const CalledHosts& called_hosts,
                                   const OtherCallersOf& other_callers) {
  const std::string object = SecretObjectName(spec.ns, spec.name);
  const pki::ValidationPolicy policy = PolicyFor(spec);
  for (int attempt = 0; attempt < kMaxConflictRestarts; ++attempt) {
    const TimePoint now = clock.Now();
    auto current = client.Get(kube::kSecrets, spec.ns, spec.name);
    if (!current) {
      return Fail(current.error().Wrap("get " + object));
    }

    if (!current->has_value()) {
      auto issued = IssueAll(spec, now);
      if (!issued) {
        return Fail(issued.error());
      }
      auto validation = ValidateIssued(*issued, policy, now, object);
      if (!validation) {
        return Fail(validation.error());
      }
      Json fresh = NewSecret(spec, *issued);
      if (spec.issuer) {
        RecordIssuer(fresh, *spec.issuer);
      }
      auto created = client.Create(kube::kSecrets, spec.ns, fresh);
      if (created) {
        return SecretOutcome{.action = SecretAction::kCreated,
                             .managed = true,
                             .ca_bundle = issued->ca_crt,
                             .tls_crt = issued->tls_crt,
                             .tls_key = issued->tls_key,
                             .uid = ObjectUid(*created),
                             .reason = "it did not exist",
                             .validation = std::move(*validation),
                             .rotation = {},
                             .rotation_problems = {},
                             .stored_data = DataOf(*created),
                             .held_back = false,
                             .names_dropped = {},
                             .other_callers = {},
                             .conflict = std::nullopt};
      }
      if (created.error().code() == ErrorCode::kAlreadyExists) {
        continue;  // another writer was first: validate what it stored
      }
      return Fail(created.error().Wrap("create " + object));
    }

    Json secret = std::move(**current);
    auto read = ReadSecretPair(secret);
    if (!read) {
      return Fail(read.error());  // nothing is written on the strength of a malformed answer
    }
    SecretPair& pair = *read;
    if (pair.type != kTlsSecretType) {
      return Fail(ErrorCode::kFailedPrecondition,
                  object + " has type \"" + pair.type + "\", not \"" + kTlsSecretType +
                      "\"; a Secret's type cannot change: delete it or choose another --secret");
    }
    const bool adopting = !pair.managed && spec.adopt;
    // A certificate that is not a CA is no part of what clients must trust: pruned, the way
    // CAs the leaf is not from are, instead of condemning the CA it sits next to.
    std::optional<PrunedBundle> pruned;
    const std::string raw_ca_crt = pair.source.ca_pem.value_or("");
    if (pair.managed && pair.source.ca_pem) {
      pruned = PruneNonCaCertificates(*pair.source.ca_pem);
      if (pruned) {
        pair.source.ca_pem = pruned->pem;
      }
    }
    // A new CA is the one repair that can fail admission calls: not while ca.key's own CA
    // certificate can still be found.
    std::optional<RecoveredBundle> recovered;
    if (pair.managed) {
      recovered = RecoverCaBundle(pair.source, raw_ca_crt, known_bundles, now);
      if (recovered) {
        pair.source.ca_pem = recovered->pem;
        pruned.reset();  // what the rebuilt ca.crt left out is said once, below
      }
    }
    // Names a follower asked for are issued with the flags' own (name_request.h); only on
    // a Secret certctl manages, the only kind it issues into.
    SecretSpec effective = spec;
    std::vector<RotationProblem> request_problems;
    if (pair.managed) {
      auto with_requests = SpecWithRequestedNames(spec, secret, object, now, request_problems);
      if (!with_requests) {
        return Fail(with_requests.error());
      }
      effective = std::move(*with_requests);
    }
    pki::ValidationPolicy effective_policy = PolicyFor(effective);
    pki::ValidationReport validation = pki::Validate(pair.source, effective_policy, now);

    if (!pair.managed && !adopting) {
      if (!pair.source.cert_pem || !pair.source.key_pem) {
        return Fail(ErrorCode::kFailedPrecondition,
                    object + " has no " + (pair.source.cert_pem ? "tls.key" : "tls.crt") +
                        " and is not managed by certctl; nothing was changed");
      }
      if (!validation.ok()) {
        return Fail(ErrorCode::kFailedPrecondition,
                    object + " is not managed by certctl and is not valid (" +
                        JoinFindings(validation.AllFindings()) +
                        "); it was left as it is (--adopt lets certctl take it over)");
      }
      return SecretOutcome{.action = SecretAction::kNone,
                           .managed = false,
                           .ca_bundle = *pair.source.ca_pem,
                           .tls_crt = *pair.source.cert_pem,
                           .tls_key = *pair.source.key_pem,
                           .uid = ObjectUid(secret),
                           .reason = "",
                           .validation = std::move(validation),
                           .rotation = {},
                           .rotation_problems = {},
                           .stored_data = {},
                           .held_back = false,
                           .names_dropped = {},
                           .other_callers = {},
                           .conflict = std::nullopt};
    }

    auto reading = ReadRotationAnnotations(secret, object);
    if (!reading) {
      return Fail(reading.error());
    }
    RotationReading judged =
        JudgeRotationState(std::move(*reading), pair.source, spec.ca_overlap, now);
    const RotationState* rotation = &judged.state;
    SecretOutcome outcome;
    outcome.managed = true;
    outcome.uid = ObjectUid(secret);
    outcome.rotation_problems = judged.problems;
    outcome.rotation_problems.insert(outcome.rotation_problems.end(), request_problems.begin(),
                                     request_problems.end());
    if (adopting && validation.ok()) {
      // Adopting changes nothing but the label.
      outcome.action = SecretAction::kAdopted;
      outcome.reason = "--adopt";
      outcome.ca_bundle = *pair.source.ca_pem;
      outcome.tls_crt = *pair.source.cert_pem;
      outcome.tls_key = *pair.source.key_pem;
      outcome.validation = std::move(validation);
      outcome.rotation = *rotation;
    } else {
      auto plan = PlanManaged(effective, pair, validation, *rotation, now);
      if (!plan) {
        return Fail(plan.error());
      }
      // A new leaf keeps the stored one's names that a target still calls: planned again with
      // them. Only when a leaf is issued, so that the steady state reads no target.
      if (called_hosts && validation.leaf && plan->action != SecretAction::kNone &&
          plan->pem.tls_crt != pair.source.cert_pem.value_or("")) {
        pki::ServiceIdentity keeping =
            WithNamesStillCalled(effective.identity, *validation.leaf, called_hosts());
        if (keeping.extra_dns_names != effective.identity.extra_dns_names ||
            keeping.ip_addresses != effective.identity.ip_addresses) {
          effective.identity = std::move(keeping);
          effective_policy = PolicyFor(effective);
          plan = PlanManaged(effective, pair, validation, *rotation, now);
          if (!plan) {
            return Fail(plan.error());
          }
        }
      }
      std::string repair = DescribeRepair(pruned, judged.problems);
      if (recovered) {
        repair = "ca.crt did not hold the CA certificate of ca.key: rebuilt from " +
                 recovered->found_in + ", the CA kept" + (repair.empty() ? "" : "; " + repair);
      }
      if (plan->action == SecretAction::kNone && !repair.empty()) {
        // Written back as judged, so the next look finds nothing to say.
        plan = Repair(pair.source, *rotation, repair);
      } else if (plan->action != SecretAction::kNone && !repair.empty()) {
        plan->reason += "; " + repair;
      }
      // A later instance's pair under other settings, wanting only this instance's names, is
      // left as it is: the objection is written once, and both report the conflict. What needs
      // a repair is repaired by whoever finds it.
      if (spec.issuer && IssuesPair(plan->action) && repair.empty() &&
          rotation->requested == RotationRequest::kNone && LacksOnlyNames(validation)) {
        if (auto issuer = RecordedIssuer(secret); issuer && YieldsTo(*spec.issuer, *issuer)) {
          outcome.conflict = YieldingConflict(*spec.issuer, *issuer);
          KeepStored(pair.source, std::move(validation), *rotation, outcome);
          auto objection = RecordedObjection(secret);
          if (objection && objection->name == spec.issuer->Name() &&
              objection->settings == spec.issuer->settings) {
            return outcome;
          }
          RecordObjection(secret, *spec.issuer);
          auto objected = UpdateAnnotations(client, spec, secret, object);
          if (!objected) {
            return Fail(objected.error());
          }
          if (!*objected) {
            continue;
          }
          outcome.uid = **objected;
          return outcome;
        }
      }
      if (plan->action == SecretAction::kNone) {
        // Nothing to write (a rotation waiting for its targets is the caller's to continue),
        // but an objection of this instance's that no longer holds: the pair now suits it.
        KeepStored(pair.source, std::move(validation), *rotation, outcome);
        if (!spec.issuer) {
          return outcome;
        }
        outcome.conflict = ObjectedConflict(*spec.issuer, secret);
        if (!DropObjection(secret, *spec.issuer)) {
          return outcome;
        }
        auto withdrawn = UpdateAnnotations(client, spec, secret, object);
        if (!withdrawn) {
          return Fail(withdrawn.error());
        }
        if (!*withdrawn) {
          continue;
        }
        outcome.uid = **withdrawn;
        return outcome;
      }
      if (hold_back && hold_back(secret)) {
        outcome.held_back = true;
        outcome.reason = std::move(plan->reason);
        outcome.ca_bundle = raw_ca_crt;
        outcome.tls_crt = pair.source.cert_pem.value_or("");
        outcome.tls_key = pair.source.key_pem.value_or("");
        outcome.validation = std::move(validation);
        outcome.rotation = *rotation;
        return outcome;
      }
      // Names the targets call were kept above; whoever else calls the dropped ones is asked
      // for only now, so that neither the steady state nor a renewal lists anything.
      outcome.names_dropped = NamesDropped(pair.source.cert_pem, plan->pem.tls_crt);
      if (other_callers && !outcome.names_dropped.empty()) {
        outcome.other_callers =
            other_callers(outcome.names_dropped, pair.source.ca_pem.value_or(""));
        if (spec.refuse_to_break_other_callers && !outcome.other_callers.found.empty()) {
          return Fail(ErrorCode::kFailedPrecondition,
                      BreaksOtherCallers(object, outcome.other_callers.found));
        }
      }
      pki::ValidationPolicy check = effective_policy;
      if (plan->lenient) {
        check.renew_before = std::chrono::seconds(0);
      }
      auto issued_validation = ValidateIssued(plan->pem, check, now, object);
      if (!issued_validation) {
        return Fail(issued_validation.error());
      }
      SetData(secret, plan->pem);
      WriteRotationState(plan->rotation, secret);
      if (spec.issuer && IssuesPair(plan->action)) {
        RecordIssuer(secret, *spec.issuer);
      } else if (spec.issuer) {
        DropObjection(secret, *spec.issuer);
      }
      outcome.action = plan->action;
      outcome.reason = std::move(plan->reason);
      outcome.ca_bundle = plan->pem.ca_crt;
      outcome.tls_crt = plan->pem.tls_crt;
      outcome.tls_key = plan->pem.tls_key;
      outcome.validation = std::move(*issued_validation);
      outcome.rotation = plan->rotation;
    }
    MarkManaged(secret);
    for (const auto& [key, value] : spec.labels) {
      secret["metadata"]["labels"][key] = value;
    }
    auto updated = client.Update(kube::kSecrets, spec.ns, spec.name, secret);
    if (updated) {
      outcome.uid = ObjectUid(*updated);
      outcome.stored_data = DataOf(*updated);
      if (spec.issuer) {
        outcome.conflict = ObjectedConflict(*spec.issuer, *updated);
      }
      return outcome;
    }
    if (updated.error().code() == ErrorCode::kConflict) {
      continue;
    }
    return Fail(updated.error().Wrap("update " + object));
  }
  return Fail(ErrorCode::kConflict, object + " kept changing under us; gave up after " +
                                        std::to_string(kMaxConflictRestarts) + " attempts");
}

Result<SecretOutcome> MoveLeafToNewCa(kube::Client& client, const SecretSpec& spec,
                                      const std::string& trusted_bundle, const Clock& clock,
                                      const CalledHosts& called_hosts) {
  const std::string object = SecretObjectName(spec.ns, spec.name);
  for (int attempt = 0; attempt < kMaxConflictRestarts; ++attempt) {
    const TimePoint now = clock.Now();
    auto current = client.Get(kube::kSecrets, spec.ns, spec.name);
    if (!current) {
      return Fail(current.error().Wrap("get " + object));
    }
    if (!current->has_value()) {
      return Fail(ErrorCode::kNotFound, object + " disappeared during a CA rotation");
    }
    Json secret = std::move(**current);
    auto read = ReadSecretPair(secret);
    if (!read) {
      return Fail(read.error());
    }
    // Judged as EnsureSecret judges it: a state that does not hold is not the step the caller
    // saw, and the next reconcile repairs it.
    auto reading = ReadRotationAnnotations(secret, object);
    if (!reading) {
      return Fail(reading.error());
    }
    std::vector<RotationProblem> ignored;  // EnsureSecret tells them
    auto effective = SpecWithRequestedNames(spec, secret, object, now, ignored);
    if (!effective) {
      return Fail(effective.error());
    }
    const pki::ValidationPolicy policy = PolicyFor(*effective);
    const pki::PairSource& source = read->source;
    const RotationReading judged =
        JudgeRotationState(std::move(*reading), source, spec.ca_overlap, now);
    const RotationState* rotation = &judged.state;
    const std::vector<pki::Certificate> bundle = BundleOf(source);
    const std::optional<pki::KeyPair> stored_ca = StoredCa(source);
    SecretOutcome outcome;
    outcome.managed = read->managed;
    outcome.uid = ObjectUid(secret);
    if (rotation->phase != RotationPhase::kTrusting || !judged.problems.empty() ||
        source.ca_pem != trusted_bundle || !stored_ca || bundle.size() != 2 ||
        !(bundle[0] == stored_ca->certificate)) {
      // Not the rotation step the caller saw: the next reconcile judges what is stored.
      outcome.ca_bundle = source.ca_pem.value_or("");
      outcome.tls_crt = source.cert_pem.value_or("");
      outcome.tls_key = source.key_pem.value_or("");
      outcome.validation = pki::Validate(source, policy, now);
      outcome.rotation = *rotation;
      return outcome;
    }
    SecretSpec issuing = *effective;
    if (called_hosts && source.cert_pem) {
      if (auto stored_leaf = pki::Certificate::FromPem(*source.cert_pem); stored_leaf) {
        issuing.identity =
            WithNamesStillCalled(issuing.identity, stored_leaf->Info(), called_hosts());
      }
    }
    auto leaf = IssueLeafPem(issuing, *stored_ca, now);
    if (!leaf) {
      return Fail(leaf.error());
    }
    PairPem pem = StoredPem(source);
    pem.tls_crt = std::move(leaf->first);
    pem.tls_key = std::move(leaf->second);
    auto validation = ValidateIssued(pem, policy, now, object);
    if (!validation) {
      return Fail(validation.error());
    }
    // Step 3 comes after the overlap, or when the previous CA expires if that is sooner.
    RotationState overlapping;
    overlapping.phase = RotationPhase::kOverlapping;
    overlapping.started = rotation->started;
    overlapping.previous_ca_until =
        std::min(bundle[1].Info().not_after, SaturatingAdd(now, spec.ca_overlap));
    SetData(secret, pem);
    WriteRotationState(overlapping, secret);
    if (spec.issuer) {
      RecordIssuer(secret, *spec.issuer);
    }
    auto updated = client.Update(kube::kSecrets, spec.ns, spec.name, secret);
    if (!updated) {
      if (updated.error().code() == ErrorCode::kConflict) {
        continue;
      }
      return Fail(updated.error().Wrap("update " + object));
    }
    outcome.uid = ObjectUid(*updated);
    outcome.stored_data = DataOf(*updated);
    outcome.action = SecretAction::kLeafMovedToNewCa;
    outcome.reason = "every target trusts the new CA";
    outcome.ca_bundle = pem.ca_crt;
    outcome.tls_crt = pem.tls_crt;
    outcome.tls_key = pem.tls_key;
    outcome.validation = std::move(*validation);
    outcome.rotation = overlapping;
    return outcome;
  }
  return Fail(ErrorCode::kConflict, object + " kept changing under us; gave up after " +
                                        std::to_string(kMaxConflictRestarts) + " attempts");
}

}  // namespace certctl::controller
