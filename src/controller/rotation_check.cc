#include "certctl/controller/rotation_check.h"

#include <algorithm>

#include "certctl/pki/certificate.h"
#include "certctl/pki/issue.h"
#include "certctl/pki/key.h"
#include "certctl/pki/validate.h"
#include "certctl/util/duration.h"

namespace certctl::controller {
namespace {

std::size_t CountCas(const std::optional<std::string>& ca_pem) {
  if (!ca_pem) {
    return 0;
  }
  auto certificates = pki::ParseCertificateBundle(*ca_pem);
  if (!certificates) {
    return 0;
  }
  return static_cast<std::size_t>(
      std::count_if(certificates->begin(), certificates->end(),
                    [](const pki::Certificate& certificate) { return certificate.Info().is_ca; }));
}

bool HasProblem(const RotationReading& reading, const char* annotation) {
  return std::any_of(
      reading.problems.begin(), reading.problems.end(),
      [&](const RotationProblem& problem) { return problem.annotation == annotation; });
}

// No rotation under way; a request from `certctl rotate` is no part of one and stays.
void ClearRotation(RotationState& state) {
  const RotationRequest requested = state.requested;
  state = RotationState();
  state.requested = requested;
}

std::string Quoted(const std::optional<TimePoint>& time) {
  return time ? "\"" + FormatRfc3339(*time) + "\"" : "\"\"";
}

// When step 2 was stored, as the Secret proves it.
TimePoint LeafMovedAt(const pki::PairSource& source, TimePoint now) {
  if (!source.cert_pem) {
    return now;
  }
  auto leaf = pki::Certificate::FromPem(*source.cert_pem);
  if (!leaf) {
    return now;
  }
  return SaturatingAdd(leaf->Info().not_before, pki::kClockSkewAllowance);
}

// Whether the leaf is from the first CA of ca.crt, the one ca.key holds: the new CA of a
// rotation past step 2.
bool LeafFromNewestCa(const pki::PairSource& source, TimePoint now) {
  if (!source.ca_key_pem || !source.ca_pem) {
    return false;
  }
  auto key = pki::PrivateKey::FromPem(*source.ca_key_pem);
  auto bundle = pki::ParseCertificateBundle(*source.ca_pem);
  if (!key || !bundle || bundle->empty() || !bundle->front().MatchesKey(*key)) {
    return false;
  }
  const pki::ValidationReport report = pki::Validate(source, pki::ValidationPolicy{}, now);
  return report.issuer_index == 0;
}

}  // namespace

std::optional<PrunedBundle> PruneNonCaCertificates(const std::string& ca_pem) {
  auto certificates = pki::ParseCertificateBundle(ca_pem);
  if (!certificates) {
    return std::nullopt;
  }
  std::vector<pki::Certificate> cas;
  PrunedBundle pruned;
  for (const pki::Certificate& certificate : *certificates) {
    const pki::CertificateInfo info = certificate.Info();
    if (info.is_ca) {
      cas.push_back(certificate);
    } else {
      pruned.removed.push_back(info.subject);
    }
  }
  if (cas.empty() || pruned.removed.empty()) {
    return std::nullopt;
  }
  pruned.pem = pki::EncodeCertificateBundle(cas);
  return pruned;
}

RotationReading JudgeRotationState(RotationReading reading, const pki::PairSource& source,
                                   std::chrono::seconds ca_overlap, TimePoint now) {
  RotationState& state = reading.state;
  const std::size_t cas = CountCas(source.ca_pem);
  if (state.phase != RotationPhase::kNone && cas < 2) {
    reading.problems.push_back(
        {kRotationPhaseAnnotation, std::string(RotationPhaseName(state.phase)),
         "metadata.annotations[" + std::string(kRotationPhaseAnnotation) + "] is \"" +
             std::string(RotationPhaseName(state.phase)) + "\", but ca.crt holds " +
             std::to_string(cas) + " CA(s) where a rotation holds two; ignored"});
    ClearRotation(state);
    return reading;
  }
  if (state.phase == RotationPhase::kNone && !HasProblem(reading, kRotationPhaseAnnotation)) {
    for (auto [annotation, time] :
         {std::pair{kRotationStartedAnnotation, &state.started},
          std::pair{kPreviousCaUntilAnnotation, &state.previous_ca_until}}) {
      if (*time) {
        reading.problems.push_back({annotation, FormatRfc3339(**time),
                                    "metadata.annotations[" + std::string(annotation) + "] is " +
                                        Quoted(*time) + " with no rotation under way; ignored"});
      }
    }
  }
  if (state.phase == RotationPhase::kNone) {
    ClearRotation(state);
    return reading;
  }
  if (state.phase == RotationPhase::kTrusting && LeafFromNewestCa(source, now)) {
    // Step 2 happened: the leaf is from the CA ca.key holds. Read as "trusting", the previous
    // CA would look like a stray one and go now, ending the overlap early.
    reading.problems.push_back(
        {kRotationPhaseAnnotation, std::string(RotationPhaseName(state.phase)),
         "metadata.annotations[" + std::string(kRotationPhaseAnnotation) +
             "] is \"trusting\", but the server certificate is already from the new CA; read as "
             "\"overlapping\""});
    state.phase = RotationPhase::kOverlapping;
  }
  if (state.phase == RotationPhase::kOverlapping) {
    const TimePoint latest = SaturatingAdd(LeafMovedAt(source, now), ca_overlap);
    if (!state.previous_ca_until) {
      // Absent or unreadable: the overlap as certctl would have written it, neither ended at
      // once nor kept open.
      if (!HasProblem(reading, kPreviousCaUntilAnnotation)) {
        reading.problems.push_back(
            {kPreviousCaUntilAnnotation, "",
             "metadata.annotations[" + std::string(kPreviousCaUntilAnnotation) +
                 "] is missing while the previous CA overlaps; set to " + Quoted(latest)});
      }
      state.previous_ca_until = latest;
    } else if (*state.previous_ca_until > latest) {
      // Times past what TimePoint holds (the year 9999) read as its latest one.
      const std::string stored = *state.previous_ca_until == TimePoint::max()
                                     ? "past the year 2262"
                                     : Quoted(state.previous_ca_until);
      reading.problems.push_back(
          {kPreviousCaUntilAnnotation, FormatRfc3339(*state.previous_ca_until),
           "metadata.annotations[" + std::string(kPreviousCaUntilAnnotation) + "] is " + stored +
               ", later than " + Quoted(latest) +
               " (when the server certificate moved to the new CA, plus --ca-overlap " +
               FormatDuration(ca_overlap) + "); clamped to that"});
      state.previous_ca_until = latest;
    }
  }
  return reading;
}

std::string DescribeProblems(const std::string& object,
                             const std::vector<RotationProblem>& problems) {
  std::string text;
  for (const RotationProblem& problem : problems) {
    text += text.empty() ? "" : "; ";
    text += object + ": " + problem.message;
  }
  return text;
}

}  // namespace certctl::controller
