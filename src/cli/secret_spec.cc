#include "cli/secret_spec.h"

#include "certctl/pki/key.h"
#include "certctl/util/duration.h"
#include "certctl/util/random.h"

#include <unistd.h>

namespace certctl::cli {

void AddSecretFlags(CLI::App& app, SecretFlags& flags) {
  AddIdentityFlags(app, flags.identity, IdentityRole::kIssueInCluster);
  AddIssuanceFlags(app, flags.issuance);
  AddDurationFlag(app, "--renew-before", flags.renew_before,
                  "Renew certificates with less validity left than this");
  app.add_option("--secret", flags.secret_name, "Secret holding the pair")
      ->check(ObjectNameCheck("Secret"))
      ->capture_default_str();
  app.add_flag("--adopt", flags.adopt,
               "Take ownership of an existing Secret certctl did not create");
  AddDurationFlag(app, "--ca-overlap", flags.ca_overlap,
                  "After a CA rotation moved the server certificate to the new CA, how long the "
                  "previous CA stays trusted (ended sooner when it expires)",
                  /*allow_zero=*/true);
}

Status CheckValidities(const SecretFlags& flags) {
  if (flags.issuance.cert_validity <= flags.renew_before ||
      flags.issuance.ca_validity <= flags.renew_before) {
    return Fail(ErrorCode::kInvalidArgument,
                "--cert-validity and --ca-validity must be longer than --renew-before (" +
                    FormatDuration(flags.renew_before) +
                    "), or every run would renew the certificates");
  }
  return {};
}

Result<controller::SecretSpec> MakeSecretSpec(const SecretFlags& flags, const std::string& ns) {
  IdentityFlags identity_flags = flags.identity;
  identity_flags.namespace_name = ns;
  controller::SecretSpec spec;
  spec.ns = ns;
  spec.name = flags.secret_name;
  spec.identity = ResolveIdentity(identity_flags);
  if (auto valid = pki::ValidateIdentity(spec.identity); !valid) {
    return Fail(valid.error());
  }
  spec.ca = MakeCaRequest(flags.issuance, spec.identity);
  spec.leaf_key_type = flags.issuance.key_type;
  spec.leaf_validity = flags.issuance.cert_validity;
  spec.renew_before = flags.renew_before;
  spec.adopt = flags.adopt;
  spec.ca_overlap = flags.ca_overlap;
  return spec;
}

std::string InstanceIdentity(const Environment& env) {
  std::string base = env.Get("POD_NAME").value_or("");
  if (base.empty()) {
    char host[256] = {};
    base = ::gethostname(host, sizeof(host) - 1) == 0 ? host : "certctl";
  }
  return base + "_" + RandomSuffix();
}

controller::Issuer MakeIssuer(const SecretFlags& flags, std::string command, std::string identity,
                              TimePoint started) {
  return MakeIssuer(flags.issuance, flags.identity.cluster_domain, std::move(command),
                    std::move(identity), started);
}

controller::Issuer MakeIssuer(const IssuanceFlags& issuance, const std::string& cluster_domain,
                              std::string command, std::string identity, TimePoint started) {
  // The CA's subject counts only when a flag sets it: its default follows --service, a name
  // that instances merge rather than fight over.
  controller::IssuerSettings settings{
      {"key-type", std::string(pki::KeyTypeName(issuance.key_type))},
      {"cluster-domain", cluster_domain}};
  if (!issuance.ca_name.empty()) {
    settings.emplace_back("ca-name", issuance.ca_name);
  }
  if (!issuance.ca_organization.empty()) {
    settings.emplace_back("ca-organization", issuance.ca_organization);
  }
  settings.emplace_back("ca-validity", FormatDuration(issuance.ca_validity));
  settings.emplace_back("cert-validity", FormatDuration(issuance.cert_validity));
  return controller::Issuer{.command = std::move(command),
                            .identity = std::move(identity),
                            .started = started,
                            .settings = std::move(settings)};
}

}  // namespace certctl::cli
