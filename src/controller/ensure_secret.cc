#include "certctl/controller/ensure_secret.h"

#include "certctl/controller/secret.h"
#include "certctl/kube/object.h"
#include "certctl/pki/certificate.h"
#include "certctl/pki/key.h"
#include "certctl/util/base64.h"

namespace certctl::controller {
namespace {

using Json = nlohmann::json;

// Conflicts mean someone else wrote in between; a handful of fresh starts is plenty.
constexpr int kMaxAttempts = 5;

struct PairPem {
  std::string ca_crt;
  std::string ca_key;
  std::string tls_crt;
  std::string tls_key;
};

Result<std::pair<std::string, std::string>> IssueLeafPem(const SecretSpec& spec,
                                                         const pki::KeyPair& ca, TimePoint now) {
  pki::LeafRequest request;
  request.dns_names = pki::RequiredDnsNames(spec.identity);
  request.ip_addresses = spec.identity.ip_addresses;
  request.key_type = spec.leaf_key_type;
  request.validity = spec.leaf_validity;
  auto leaf = pki::IssueLeaf(request, ca, now);
  if (!leaf) {
    return Fail(leaf.error().Wrap("issue server certificate"));
  }
  auto key = leaf->key.ToPem();
  if (!key) {
    return Fail(key.error());
  }
  return std::make_pair(leaf->certificate.ToPem(), std::move(*key));
}

// A new CA and leaf; ca.crt also carries `kept` (old CAs still trusted during the overlap).
Result<PairPem> IssueAll(const SecretSpec& spec, TimePoint now,
                         const std::vector<pki::Certificate>& kept) {
  auto ca = pki::IssueCa(spec.ca, now);
  if (!ca) {
    return Fail(ca.error().Wrap("issue CA"));
  }
  auto leaf = IssueLeafPem(spec, *ca, now);
  if (!leaf) {
    return Fail(leaf.error());
  }
  auto ca_key = ca->key.ToPem();
  if (!ca_key) {
    return Fail(ca_key.error());
  }
  std::vector<pki::Certificate> bundle = {ca->certificate};
  bundle.insert(bundle.end(), kept.begin(), kept.end());
  return PairPem{pki::EncodeCertificateBundle(bundle), std::move(*ca_key), std::move(leaf->first),
                 std::move(leaf->second)};
}

void SetData(Json& secret, const PairPem& pem) {
  Json& data = secret["data"];
  if (!data.is_object()) {
    data = Json::object();
  }
  data["ca.crt"] = Base64Encode(pem.ca_crt);
  data["ca.key"] = Base64Encode(pem.ca_key);
  data["tls.crt"] = Base64Encode(pem.tls_crt);
  data["tls.key"] = Base64Encode(pem.tls_key);
}

void MarkManaged(Json& secret) {
  Json& labels = secret["metadata"]["labels"];
  if (!labels.is_object()) {
    labels = Json::object();
  }
  labels[kManagedByLabel] = kManagedByValue;
}

Json NewSecret(const SecretSpec& spec, const PairPem& pem) {
  Json secret = {{"apiVersion", "v1"},
                 {"kind", "Secret"},
                 {"metadata", {{"name", spec.name}, {"namespace", spec.ns}}},
                 {"type", kTlsSecretType}};
  MarkManaged(secret);
  SetData(secret, pem);
  return secret;
}

pki::PairSource SourceOf(const PairPem& pem) {
  pki::PairSource source;
  source.ca_pem = pem.ca_crt;
  source.ca_key_pem = pem.ca_key;
  source.cert_pem = pem.tls_crt;
  source.key_pem = pem.tls_key;
  return source;
}

// What was just issued must pass the same validation the next run will apply, or every run
// would replace it again (a validity shorter than renew-before, a clock far off): such a pair
// is never written.
Result<pki::ValidationReport> ValidateIssued(const PairPem& pem,
                                             const pki::ValidationPolicy& policy, TimePoint now,
                                             const std::string& object) {
  pki::ValidationReport validation = pki::Validate(SourceOf(pem), policy, now);
  if (!validation.ok()) {
    return Fail(ErrorCode::kInternal,
                "the pair issued for " + object + " does not pass its own validation (" +
                    JoinFindings(validation.AllFindings()) + "); nothing was written");
  }
  return validation;
}

std::string Describe(const std::vector<pki::PartFinding>& findings, bool ca_parts) {
  std::string text;
  for (const pki::PartFinding& entry : findings) {
    const bool is_ca = entry.part == pki::Part::kCa || entry.part == pki::Part::kCaKey;
    if (is_ca != ca_parts) {
      continue;
    }
    text += text.empty() ? "" : "; ";
    text += entry.finding.message;
  }
  return text;
}

// The stored CA, when ca.key parses and belongs to a CA certificate of ca.crt.
std::optional<pki::KeyPair> StoredCa(const pki::PairSource& source) {
  if (!source.ca_pem || !source.ca_key_pem) {
    return std::nullopt;
  }
  auto key = pki::PrivateKey::FromPem(*source.ca_key_pem);
  auto certificates = pki::ParseCertificateBundle(*source.ca_pem);
  if (!key || !certificates) {
    return std::nullopt;
  }
  for (const pki::Certificate& certificate : *certificates) {
    if (certificate.Info().is_ca && certificate.MatchesKey(*key)) {
      return pki::KeyPair{certificate, *key};
    }
  }
  return std::nullopt;
}

// CAs of the old bundle worth keeping next to a new one: still valid CA certificates.
std::vector<pki::Certificate> StillValidCas(const pki::PairSource& source, TimePoint now) {
  std::vector<pki::Certificate> kept;
  if (!source.ca_pem) {
    return kept;
  }
  auto certificates = pki::ParseCertificateBundle(*source.ca_pem);
  if (!certificates) {
    return kept;
  }
  for (const pki::Certificate& certificate : *certificates) {
    const pki::CertificateInfo info = certificate.Info();
    if (info.is_ca && info.not_before <= now && now < info.not_after) {
      kept.push_back(certificate);
    }
  }
  return kept;
}

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
    case SecretAction::kAdopted:
      return "adopted";
  }
  return "unknown";
}

pki::ValidationPolicy PolicyFor(const SecretSpec& spec) {
  pki::ValidationPolicy policy;
  policy.dns_names = pki::RequiredDnsNames(spec.identity);
  policy.ip_addresses = spec.identity.ip_addresses;
  policy.renew_before = spec.renew_before;
  return policy;
}

namespace {

// For Events only: a uid of the wrong type just goes unused.
std::string ObjectUid(const Json& object) {
  auto uid = kube::OptionalString(object, "/metadata/uid", "secret");
  return uid && *uid ? **uid : "";
}

}  // namespace

Result<SecretOutcome> EnsureSecret(kube::Client& client, const SecretSpec& spec,
                                   const Clock& clock) {
  const std::string object = SecretObjectName(spec.ns, spec.name);
  const pki::ValidationPolicy policy = PolicyFor(spec);
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    const TimePoint now = clock.Now();
    auto current = client.Get(kube::kSecrets, spec.ns, spec.name);
    if (!current) {
      return Fail(current.error().Wrap("get " + object));
    }

    if (!current->has_value()) {
      auto issued = IssueAll(spec, now, {});
      if (!issued) {
        return Fail(issued.error());
      }
      auto validation = ValidateIssued(*issued, policy, now, object);
      if (!validation) {
        return Fail(validation.error());
      }
      auto created = client.Create(kube::kSecrets, spec.ns, NewSecret(spec, *issued));
      if (created) {
        return SecretOutcome{.action = SecretAction::kCreated,
                             .managed = true,
                             .ca_bundle = issued->ca_crt,
                             .tls_crt = issued->tls_crt,
                             .tls_key = issued->tls_key,
                             .uid = ObjectUid(*created),
                             .reason = "it did not exist",
                             .validation = std::move(*validation)};
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
    pki::ValidationReport validation = pki::Validate(pair.source, policy, now);

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
                           .validation = std::move(validation)};
    }

    SecretOutcome outcome;
    outcome.managed = true;
    outcome.uid = ObjectUid(secret);
    // What is stored stays served unless a new pair replaces it below.
    outcome.tls_crt = pair.source.cert_pem.value_or("");
    outcome.tls_key = pair.source.key_pem.value_or("");
    std::optional<pki::KeyPair> stored_ca = StoredCa(pair.source);
    // A managed Secret that lost ca.key could never re-issue its leaf: it gets a new CA now.
    // Adopting changes nothing but the label, so a Secret being adopted keeps its content.
    const bool keyless = !stored_ca && !adopting;
    if (validation.ok() && !keyless) {
      if (!adopting) {
        outcome.ca_bundle = *pair.source.ca_pem;
        outcome.validation = std::move(validation);
        return outcome;
      }
      outcome.action = SecretAction::kAdopted;
      outcome.reason = "--adopt";
      outcome.ca_bundle = *pair.source.ca_pem;
      outcome.validation = std::move(validation);
    } else {
      PairPem pem;
      if (validation.CaOk() && stored_ca) {
        auto leaf = IssueLeafPem(spec, *stored_ca, now);
        if (!leaf) {
          return Fail(leaf.error());
        }
        pem = PairPem{*pair.source.ca_pem, *pair.source.ca_key_pem, std::move(leaf->first),
                      std::move(leaf->second)};
        outcome.action = SecretAction::kLeafReissued;
        outcome.reason = Describe(validation.findings, /*ca_parts=*/false);
      } else {
        auto issued = IssueAll(spec, now, StillValidCas(pair.source, now));
        if (!issued) {
          return Fail(issued.error());
        }
        pem = std::move(*issued);
        outcome.action = SecretAction::kCaReplaced;
        outcome.reason = stored_ca ? Describe(validation.findings, /*ca_parts=*/true)
                                   : "no usable ca.key for the CA in ca.crt";
        if (outcome.reason.empty()) {
          outcome.reason = Describe(validation.findings, /*ca_parts=*/false);
        }
      }
      auto issued_validation = ValidateIssued(pem, policy, now, object);
      if (!issued_validation) {
        return Fail(issued_validation.error());
      }
      SetData(secret, pem);
      outcome.ca_bundle = pem.ca_crt;
      outcome.tls_crt = pem.tls_crt;
      outcome.tls_key = pem.tls_key;
      outcome.validation = std::move(*issued_validation);
    }
    MarkManaged(secret);
    auto updated = client.Update(kube::kSecrets, spec.ns, spec.name, secret);
    if (updated) {
      outcome.uid = ObjectUid(*updated);
      return outcome;
    }
    if (updated.error().code() == ErrorCode::kConflict) {
      continue;
    }
    return Fail(updated.error().Wrap("update " + object));
  }
  return Fail(ErrorCode::kConflict, object + " kept changing under us; gave up after " +
                                        std::to_string(kMaxAttempts) + " attempts");
}

}  // namespace certctl::controller
