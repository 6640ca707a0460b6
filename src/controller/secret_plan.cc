#include "controller/secret_plan.h"

#include <algorithm>

#include "certctl/util/base64.h"
#include "certctl/util/safety_controls.h"

namespace certctl::controller {
namespace {

using Json = nlohmann::json;

pki::PairSource SourceOf(const PairPem& pem) {
  pki::PairSource source;
  source.ca_pem = pem.ca_crt;
  source.ca_key_pem = pem.ca_key;
  source.cert_pem = pem.tls_crt;
  source.key_pem = pem.tls_key;
  return source;
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

bool ValidNow(const pki::Certificate& certificate, TimePoint now) {
  const pki::CertificateInfo info = certificate.Info();
  return info.not_before <= now && now < info.not_after;
}

// The certificate of ca.crt that issued the leaf, as validation found it.
std::optional<pki::Certificate> IssuerOf(const pki::ValidationReport& validation,
                                         const std::vector<pki::Certificate>& bundle) {
  if (!validation.issuer_index || *validation.issuer_index >= bundle.size()) {
    return std::nullopt;
  }
  return bundle[*validation.issuer_index];
}

// Whether a TLS client trusting ca.crt accepts the stored leaf right now: everything checked
// but how soon it runs out, and ca.key (only needed to issue).
bool ServesNow(const pki::PairSource& source, const pki::ValidationPolicy& policy, TimePoint now) {
  pki::ValidationPolicy lenient = policy;
  lenient.renew_before = std::chrono::seconds(0);
  const pki::ValidationReport report = pki::Validate(source, lenient, now);
  return std::all_of(report.findings.begin(), report.findings.end(),
                     [](const pki::PartFinding& entry) { return entry.part == pki::Part::kCaKey; });
}

Result<Plan> ReplaceAll(const SecretSpec& spec, TimePoint now, std::string reason);

// Step 1: a new CA next to the one that issued the served leaf, which stays.
Result<Plan> StartRotation(const SecretSpec& spec, const pki::PairSource& source,
                           const pki::Certificate& issuer, TimePoint now, std::string reason) {
  if (SafetyRemoved("two-ca-bundle")) {
    return ReplaceAll(spec, now, std::move(reason));
  }
  auto ca = pki::IssueCa(spec.ca, now);
  if (!ca) {
    return Fail(ca.error().Wrap("issue CA"));
  }
  auto ca_key = ca->key.ToPem();
  if (!ca_key) {
    return Fail(ca_key.error());
  }
  Plan plan;
  plan.action = SecretAction::kCaRotationStarted;
  plan.pem = StoredPem(source);
  plan.pem.ca_crt = pki::EncodeCertificateBundle({ca->certificate, issuer});
  plan.pem.ca_key = std::move(*ca_key);
  plan.rotation.phase = RotationPhase::kTrusting;
  plan.rotation.started = now;
  plan.reason = std::move(reason);
  plan.lenient = true;
  return plan;
}

Result<Plan> ReplaceAll(const SecretSpec& spec, TimePoint now, std::string reason) {
  auto issued = IssueAll(spec, now);
  if (!issued) {
    return Fail(issued.error());
  }
  return Plan{.action = SecretAction::kCaReplaced,
              .pem = std::move(*issued),
              .rotation = {},
              .reason = std::move(reason),
              .lenient = false};
}

Result<Plan> ReissueLeaf(const SecretSpec& spec, const pki::PairSource& source,
                         const pki::KeyPair& ca, TimePoint now, RotationState rotation,
                         std::string reason) {
  auto leaf = IssueLeafPem(spec, ca, now);
  if (!leaf) {
    return Fail(leaf.error());
  }
  Plan plan{.action = SecretAction::kLeafReissued,
            .pem = StoredPem(source),
            .rotation = std::move(rotation),
            .reason = std::move(reason),
            .lenient = false};
  plan.pem.tls_crt = std::move(leaf->first);
  plan.pem.tls_key = std::move(leaf->second);
  return plan;
}

// Step 3, or any bundle of a Secret at rest that holds more than its CA: ca.crt keeps the CA
// the leaf is from.
Plan RetirePrevious(const pki::PairSource& source, const pki::Certificate& current,
                    std::string reason) {
  Plan plan{.action = SecretAction::kPreviousCaRetired,
            .pem = StoredPem(source),
            .rotation = {},
            .reason = std::move(reason),
            .lenient = false};
  plan.pem.ca_crt = pki::EncodeCertificateBundle({current});
  return plan;
}

}  // namespace

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

// A new CA and a leaf from it.
Result<PairPem> IssueAll(const SecretSpec& spec, TimePoint now) {
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
  return PairPem{ca->certificate.ToPem(), std::move(*ca_key), std::move(leaf->first),
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
  for (const auto& [key, value] : spec.labels) {
    secret["metadata"]["labels"][key] = value;
  }
  SetData(secret, pem);
  return secret;
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

std::vector<pki::Certificate> BundleOf(const pki::PairSource& source) {
  if (!source.ca_pem) {
    return {};
  }
  auto certificates = pki::ParseCertificateBundle(*source.ca_pem);
  return certificates ? std::move(*certificates) : std::vector<pki::Certificate>();
}

namespace {

// Every certificate PEM block of `text` that parses, in order; other text is skipped.
std::vector<pki::Certificate> CertificatesAmong(std::string_view text) {
  static constexpr std::string_view kBegin = "-----BEGIN CERTIFICATE-----";
  static constexpr std::string_view kEnd = "-----END CERTIFICATE-----";
  std::vector<pki::Certificate> found;
  for (std::size_t begin = text.find(kBegin); begin != std::string_view::npos;
       begin = text.find(kBegin, begin + kBegin.size())) {
    const std::size_t end = text.find(kEnd, begin);
    if (end == std::string_view::npos) {
      break;
    }
    if (auto certificate = pki::Certificate::FromPem(text.substr(begin, end + kEnd.size() - begin));
        certificate) {
      found.push_back(std::move(*certificate));
    }
  }
  return found;
}

bool IsCaOf(const pki::Certificate& certificate, const pki::PrivateKey& key, TimePoint now) {
  return certificate.Info().is_ca && certificate.MatchesKey(key) && ValidNow(certificate, now);
}

}  // namespace

std::optional<RecoveredBundle> RecoverCaBundle(const pki::PairSource& source,
                                               const std::string& raw_ca_crt,
                                               const KnownBundles& known_bundles, TimePoint now) {
  if (!source.ca_key_pem || StoredCa(source)) {
    return std::nullopt;
  }
  auto key = pki::PrivateKey::FromPem(*source.ca_key_pem);
  if (!key) {
    return std::nullopt;
  }
  // In ca.crt itself, among text that is not a certificate: the CAs found there stay (what is
  // not the leaf's is retired as any extra CA is).
  std::vector<pki::Certificate> cas;
  bool has_key_ca = false;
  for (pki::Certificate& certificate : CertificatesAmong(raw_ca_crt)) {
    if (certificate.Info().is_ca) {
      has_key_ca = has_key_ca || IsCaOf(certificate, *key, now);
      cas.push_back(std::move(certificate));
    }
  }
  if (has_key_ca) {
    return RecoveredBundle{pki::EncodeCertificateBundle(cas), "ca.crt"};
  }
  if (!known_bundles) {
    return std::nullopt;
  }
  for (const KnownBundle& known : known_bundles()) {
    auto bundle = pki::ParseCertificateBundle(known.pem);
    if (!bundle || bundle->empty() ||
        !std::all_of(bundle->begin(), bundle->end(),
                     [](const pki::Certificate& c) { return c.Info().is_ca; })) {
      continue;  // only a bundle of CAs certctl could have written is taken as it is
    }
    if (std::any_of(bundle->begin(), bundle->end(),
                    [&](const pki::Certificate& c) { return IsCaOf(c, *key, now); })) {
      return RecoveredBundle{known.pem, known.source + "'s caBundle"};
    }
  }
  return std::nullopt;
}

PairPem StoredPem(const pki::PairSource& source) {
  return PairPem{source.ca_pem.value_or(""), source.ca_key_pem.value_or(""),
                 source.cert_pem.value_or(""), source.key_pem.value_or("")};
}

// Decides what a managed (or adopted) Secret needs. No write: action kNone.
Result<Plan> PlanManaged(const SecretSpec& spec, const SecretPair& pair,
                         const pki::ValidationReport& validation, const RotationState& state,
                         TimePoint now) {
  const pki::ValidationPolicy policy = PolicyFor(spec);
  const pki::PairSource& source = pair.source;
  const std::vector<pki::Certificate> bundle = BundleOf(source);
  const std::optional<pki::KeyPair> stored_ca = StoredCa(source);
  const std::optional<pki::Certificate> issuer = IssuerOf(validation, bundle);
  const bool serves = ServesNow(source, policy, now);
  const bool leaf_from_stored_ca = stored_ca && issuer && *issuer == stored_ca->certificate;
  const bool rotate_ca = state.requested == RotationRequest::kCa;
  const bool rotate_leaf = state.requested == RotationRequest::kLeaf;
  RotationState untouched = state;
  untouched.requested = RotationRequest::kNone;

  if (state.phase == RotationPhase::kTrusting) {
    // Consistent: ca.crt = new CA (ca.key's) + the CA the leaf is from, both valid.
    const bool consistent = stored_ca && bundle.size() == 2 &&
                            bundle[0] == stored_ca->certificate && ValidNow(bundle[0], now) &&
                            issuer && *issuer == bundle[1];
    if (consistent && serves) {
      return Plan{.action = SecretAction::kNone, .pem = {}, .rotation = state, .reason = ""};
    }
    if (consistent) {
      // The old leaf no longer serves: waiting for the targets would gain nothing. What
      // follows is step 2's state.
      RotationState overlapping;
      overlapping.phase = RotationPhase::kOverlapping;
      overlapping.started = state.started;
      overlapping.previous_ca_until =
          std::min(bundle[1].Info().not_after, SaturatingAdd(now, spec.ca_overlap));
      auto plan = ReissueLeaf(spec, source, *stored_ca, now, overlapping,
                              "the server certificate of the rotation's previous CA no longer "
                              "serves (" +
                                  JoinFindings(validation.AllFindings()) + ")");
      if (plan) {
        plan->action = SecretAction::kLeafMovedToNewCa;
      }
      return plan;
    }
    // ca.crt and ca.key do not hold what step 1 stores: judged as a Secret at rest below,
    // which keeps the CA the stored leaf chains to while that leaf can be served.
  }

  if (state.phase == RotationPhase::kOverlapping && leaf_from_stored_ca && serves) {
    const bool previous_expired =
        bundle.size() > 1 && std::any_of(bundle.begin(), bundle.end(), [&](const auto& ca) {
          return !(ca == stored_ca->certificate) && !ValidNow(ca, now);
        });
    const bool overlap_over = !state.previous_ca_until || now >= *state.previous_ca_until;
    if (rotate_ca || !validation.CaOk()) {
      // The next rotation's step 1 retires the previous CA at the same time: the leaf is from
      // the current CA, which both bundles hold, and a bundle never holds three CAs.
      return StartRotation(spec, source, stored_ca->certificate, now,
                           rotate_ca ? "certctl rotate --ca (the previous CA retired early)"
                                     : Describe(validation.findings, /*ca_parts=*/true));
    }
    if (overlap_over || previous_expired || bundle.size() < 2) {
      return RetirePrevious(source, stored_ca->certificate,
                            previous_expired ? "the previous CA expired"
                                             : "the overlap with the previous CA is over");
    }
    if (!validation.LeafOk() || rotate_leaf) {
      return ReissueLeaf(
          spec, source, *stored_ca, now, untouched,
          rotate_leaf ? "certctl rotate" : Describe(validation.findings, /*ca_parts=*/false));
    }
    return Plan{.action = SecretAction::kNone, .pem = {}, .rotation = state, .reason = ""};
  }

  // At rest (or an overlap that no longer holds together).
  if (!stored_ca || rotate_ca || !validation.CaOk() || (issuer && !leaf_from_stored_ca)) {
    std::string reason = rotate_ca    ? "certctl rotate --ca"
                         : !stored_ca ? "no usable ca.key for the CA in ca.crt"
                                      : Describe(validation.findings, /*ca_parts=*/true);
    if (reason.empty()) {
      reason = "the server certificate is not from the CA whose key is stored";
    }
    if (serves && issuer && ValidNow(*issuer, now)) {
      return StartRotation(spec, source, *issuer, now, std::move(reason));
    }
    const std::string leaf = Describe(validation.findings, /*ca_parts=*/false);
    return ReplaceAll(spec, now, leaf.empty() ? reason : reason + "; " + leaf);
  }
  if (!validation.LeafOk() || rotate_leaf) {
    return ReissueLeaf(
        spec, source, *stored_ca, now, untouched,
        rotate_leaf ? "certctl rotate" : Describe(validation.findings, /*ca_parts=*/false));
  }
  if (bundle.size() > 1 || state.phase != RotationPhase::kNone) {
    return RetirePrevious(source, stored_ca->certificate,
                          "ca.crt holds CAs the server certificate is not from");
  }
  return Plan{.action = SecretAction::kNone, .pem = {}, .rotation = state, .reason = ""};
}

// The Secret as stored, with what did not belong removed (`source` is already pruned) and the
// rotation annotations as judged.
Plan Repair(const pki::PairSource& source, const RotationState& state, std::string reason) {
  return Plan{.action = SecretAction::kRepaired,
              .pem = StoredPem(source),
              .rotation = state,
              .reason = std::move(reason),
              .lenient = state.phase == RotationPhase::kTrusting};
}

std::string DescribeRepair(const std::optional<PrunedBundle>& pruned,
                           const std::vector<RotationProblem>& problems) {
  std::string text;
  if (pruned) {
    text = "ca.crt held certificates that are not CAs, removed:";
    for (const std::string& subject : pruned->removed) {
      text += " " + subject;
    }
  }
  for (const RotationProblem& problem : problems) {
    text += (text.empty() ? "" : "; ") + problem.message;
  }
  return text;
}

}  // namespace certctl::controller
