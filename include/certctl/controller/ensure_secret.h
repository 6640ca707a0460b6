#pragma once

#include <chrono>
#include <string>
#include <vector>

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
};

enum class SecretAction {
  kNone,          // valid as it was; nothing written
  kCreated,       // there was no Secret: CA and leaf made
  kLeafReissued,  // leaf re-issued from the stored CA; ca.crt unchanged
  kCaReplaced,    // new CA and leaf; ca.crt keeps the old CA while it is still valid
  kAdopted,       // valid external Secret labelled as managed; content unchanged
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
};

// Makes sure the Secret holds a valid pair for `spec`:
//  - absent: a CA and leaf are created; if another writer created it first, what it stored is
//    validated instead of overwritten;
//  - managed (or adopted): a bad leaf under a good CA is re-issued with ca.key; a bad,
//    expiring or keyless CA is replaced together with the leaf;
//  - external: never written; kFailedPrecondition listing the findings when invalid.
// A Secret of another type, or an external one without tls.crt/tls.key, is
// kFailedPrecondition naming it; nothing is written. Every write is a whole-object update
// carrying the resourceVersion read, so a concurrent writer makes it start over from a fresh
// read (kConflict) instead of losing either change.
Result<SecretOutcome> EnsureSecret(kube::Client& client, const SecretSpec& spec,
                                   const Clock& clock);

// The policy the leaf must satisfy for `spec`.
pki::ValidationPolicy PolicyFor(const SecretSpec& spec);

}  // namespace certctl::controller
