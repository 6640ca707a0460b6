#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "certctl/controller/issuer.h"
#include "certctl/controller/other_callers.h"
#include "certctl/controller/rotation.h"
#include "certctl/controller/rotation_check.h"
#include "certctl/kube/client.h"
#include "certctl/pki/issue.h"
#include "certctl/pki/names.h"
#include "certctl/pki/validate.h"
#include "certctl/util/clock.h"
#include "certctl/util/finding.h"
#include "certctl/util/result.h"

namespace certctl::controller {

// What the Secret must hold and how to make it.
struct SecretSpec {
  std::string ns;
  std::string name;
  pki::ServiceIdentity identity;  // its names become the leaf's SANs, in contract order
  pki::CaRequest ca;              // used when a CA has to be made
  pki::KeyType leaf_key_type = pki::KeyType::kEcdsaP256;
  std::chrono::seconds leaf_validity{std::chrono::hours(24 * 365 * 10)};
  std::chrono::seconds renew_before = pki::kDefaultRenewBefore;
  bool adopt = false;  // take ownership of a Secret certctl did not create
  // How long the previous CA stays trusted after the leaf moved to a new one (step 3 of a
  // rotation comes then, or when the previous CA expires if that is sooner).
  std::chrono::seconds ca_overlap{kDefaultCaOverlap};
  // A new leaf that drops names webhooks outside the targets still call (other_callers.h):
  // false re-issues it all the same and tells them (a controller must not wedge); true
  // refuses, writing nothing, until a person confirms (`job --force-reissue`).
  bool refuse_to_break_other_callers = false;
  // This process, recorded with every pair it issues (issuer.h); none records nothing and
  // never yields to another instance.
  std::optional<Issuer> issuer;
  // Labels set with the managed-by label whenever certctl writes the Secret (`certctl
  // controller` finds the Secrets it issued by one).
  std::map<std::string, std::string> labels;
};

enum class SecretAction {
  kNone,               // valid as it was; nothing written
  kCreated,            // there was no Secret: CA and leaf made
  kLeafReissued,       // leaf re-issued from the stored CA; ca.crt unchanged
  kCaReplaced,         // new CA and leaf at once: the stored leaf could not be served anyway
  kCaRotationStarted,  // rotation step 1: a new CA stored next to the one the leaf is from
  kLeafMovedToNewCa,   // rotation step 2: the leaf re-issued from the new CA
  kPreviousCaRetired,  // rotation step 3: the previous CA left ca.crt
  kAdopted,            // valid external Secret labelled as managed; content unchanged
  // What did not belong removed, nothing else changed: certificates of ca.crt that are not
  // CAs, rotation annotations that do not match what the Secret holds (rotation_check.h).
  kRepaired,
};

std::string_view SecretActionName(SecretAction action);

struct SecretOutcome {
  SecretAction action = SecretAction::kNone;
  bool managed = false;
  std::string ca_bundle;  // ca.crt as stored: what targets must trust
  std::string tls_crt;    // the leaf and its key as stored: what the server serves
  std::string tls_key;
  std::string uid;     // the Secret's metadata.uid as stored (for Events); empty when unknown
  std::string reason;  // why it was (re)written, for the log; empty for kNone
  pki::ValidationReport validation;  // of the content now stored
  RotationState rotation;            // as now stored
  // The rotation annotations found ignored or clamped (see JudgeRotationState); the write,
  // if any, stored the state they were corrected to.
  std::vector<RotationProblem> rotation_problems;
  // The Secret's data as this call stored it (base64, by key); empty when it wrote nothing.
  std::map<std::string, std::string> stored_data;
  // A write was due but the caller held it back (SecretHoldBack): nothing was written, and
  // `reason` says what waits.
  bool held_back = false;
  // Names the server certificate covered before this write and no longer does (a --service
  // changed, or another webhook shares the Secret): whoever calls them fails now.
  std::vector<std::string> names_dropped;
  // Looked for only when names are dropped: who outside the targets still calls them.
  OtherCallersLook other_callers;
  // Another instance manages the Secret under other settings (issuer.h): this one yielded to
  // it (nothing but its objection written) or issued the pair it objects to.
  std::optional<ConfigurationConflict> conflict;
};

// A CA bundle kept outside the Secret, where the CA of a damaged ca.crt may still be found:
// a target's caBundle. `source` names it ("validatingwebhookconfiguration/hook").
struct KnownBundle {
  std::string source;
  std::string pem;
};
// Read only when ca.crt holds no certificate of ca.key's (the steady state reads nothing).
using KnownBundles = std::function<std::vector<KnownBundle>()>;

// The names the targets call now (CalledHostsOfTargets): a name the stored leaf has and a
// target still calls stays in a re-issued leaf, though no flag names it (after a rename, the
// old Service's name until the targets are pointed at the new one). Read only when a new
// leaf is issued.
using CalledHosts = std::function<std::vector<std::string>()>;

// The webhooks outside the targets that call one of `dropped` trusting `ca_bundle` (the
// Secret's ca.crt as stored), FindOtherCallers. Read only when a new leaf drops names.
using OtherCallersOf = std::function<OtherCallersLook(const std::vector<std::string>& dropped,
                                                      const std::string& ca_bundle)>;

// Asked with the Secret as read before any write to it but its creation and an adoption:
// true holds the write back (another writer keeps undoing certctl's, see loop/damping.h).
using SecretHoldBack = std::function<bool(const kube::Json& secret_as_read)>;

// Makes sure the Secret holds a valid pair for `spec`:
//  - absent: a CA and leaf are created; if another writer created it first, what it stored is
//    validated instead of overwritten;
//  - managed: certificates of ca.crt that are not CAs are pruned, and the rotation
//    annotations are judged (JudgeRotationState) before anything acts on them; what was
//    pruned or corrected is written back (kRepaired when nothing else is written);
//  - managed: a ca.crt that holds no certificate of ca.key's (garbage, leaves, a foreign CA of
//    the same name) is rebuilt from the first place that still holds one, valid now: ca.crt
//    itself among other text, else a bundle of `known_bundles` (taken as it is, so the
//    targets need no change); the CA is kept and only the leaf is re-issued if it needs to be;
//  - managed (or adopted): a bad leaf under a good CA is re-issued with ca.key (also when
//    `certctl rotate` asked for it); a bad, expiring or keyless CA, or one `certctl rotate
//    --ca` asked to replace, starts a rotation (step 1, see rotation.h) while the stored leaf
//    can still be served, and is replaced together with the leaf when it cannot; a rotation
//    in the trusting phase is left for the caller to continue (MoveLeafToNewCa once every
//    target trusts outcome.ca_bundle), one in the overlapping phase gets step 3 when due;
//  - external: never written; kFailedPrecondition listing the findings when invalid;
//  - a write `hold_back` holds: nothing written, outcome.held_back set;
//  - a leaf issued for a managed Secret names, beyond `spec`'s names, those a follower asked
//    for (name_request.h) and those of the stored leaf that `called_hosts` still calls;
//  - with spec.issuer, every pair issued records it; a pair another `certctl run` that
//    started later issued under other settings, lacking only names, is left as it is
//    (YieldsTo): the objection is recorded once and outcome.conflict says whose pair it is;
//    an objection to a pair issued under spec.issuer's settings is outcome.conflict too;
//  - a leaf that drops names of the stored one asks `other_callers` who else calls them; with
//    spec.refuse_to_break_other_callers, any it finds is kFailedPrecondition naming them and
//    the dropped names, and nothing is written; otherwise they are in outcome.other_callers.
// A Secret of another type, or an external one without tls.crt/tls.key, is
// kFailedPrecondition naming it; nothing is written. Every write is a whole-object update
// carrying the resourceVersion read, so a concurrent writer makes it start over from a fresh
// read (kConflict) instead of losing either change.
Result<SecretOutcome> EnsureSecret(kube::Client& client, const SecretSpec& spec, const Clock& clock,
                                   const KnownBundles& known_bundles = {},
                                   const SecretHoldBack& hold_back = {},
                                   const CalledHosts& called_hosts = {},
                                   const OtherCallersOf& other_callers = {});

// Rotation step 2: the leaf is re-issued from the new CA. Call it only once every target
// holds `trusted_bundle` (outcome.ca_bundle of the phase "trusting"); when the Secret no
// longer holds that bundle in that phase (another writer went on, or started over), nothing
// is written and the outcome describes what is stored.
Result<SecretOutcome> MoveLeafToNewCa(kube::Client& client, const SecretSpec& spec,
                                      const std::string& trusted_bundle, const Clock& clock,
                                      const CalledHosts& called_hosts = {});

// The policy the leaf must satisfy for `spec`.
pki::ValidationPolicy PolicyFor(const SecretSpec& spec);

}  // namespace certctl::controller
