#pragma once

#include <chrono>
#include <string>

#include "certctl/controller/ensure_secret.h"
#include "certctl/util/clock.h"
#include "certctl/util/environment.h"
#include "certctl/util/result.h"

#include "cli/flags.h"

namespace certctl::cli {

// The flags `job`, `run` and `rotate` share to say what the Secret must hold.
struct SecretFlags {
  IdentityFlags identity;
  IssuanceFlags issuance;
  std::chrono::seconds renew_before = pki::kDefaultRenewBefore;
  std::string secret_name = kDefaultSecretName;
  bool adopt = false;
  std::chrono::seconds ca_overlap{std::chrono::hours(24)};
};
void AddSecretFlags(CLI::App& app, SecretFlags& flags);

// kInvalidArgument (a usage error) when a validity is not longer than --renew-before: checked
// before anything talks to the cluster.
Status CheckValidities(const SecretFlags& flags);

// The SecretSpec for the Secret in `ns`; kInvalidArgument (a usage error) for a bad service
// identity.
Result<controller::SecretSpec> MakeSecretSpec(const SecretFlags& flags, const std::string& ns);

// $POD_NAME or the host name, plus "_" and a random suffix: unique even when two processes
// share a pod name (a restarted container), as client-go's identities are.
std::string InstanceIdentity(const Environment& env);

// This process as the Secret records the issuer of a pair (controller/issuer.h): `command`
// ("run", "job"), its identity, when it started, and the settings of `flags` that shape a
// pair beyond its names.
controller::Issuer MakeIssuer(const SecretFlags& flags, std::string command, std::string identity,
                              TimePoint started);
// The same from the issuance flags and --cluster-domain alone (`certctl controller`).
controller::Issuer MakeIssuer(const IssuanceFlags& issuance, const std::string& cluster_domain,
                              std::string command, std::string identity, TimePoint started);

}  // namespace certctl::cli
