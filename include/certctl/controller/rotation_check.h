#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "certctl/controller/rotation.h"
#include "certctl/pki/validate.h"
#include "certctl/util/clock.h"

namespace certctl::controller {

// How long the previous CA stays trusted after the leaf moved to a new one, by default.
inline constexpr std::chrono::hours kDefaultCaOverlap{24};

// ca.crt without the certificates that are not CAs (a server certificate appended or
// prepended by hand): trusting one grants nothing, and its findings would condemn the CA.
struct PrunedBundle {
  std::string pem;                   // the CA certificates, in their order
  std::vector<std::string> removed;  // the subjects of the certificates left out
};

// nullopt when there is nothing to prune: ca.crt does not parse, holds only CAs, or holds no
// CA at all (then nothing in it can be kept and the CA is judged as it stands).
std::optional<PrunedBundle> PruneNonCaCertificates(const std::string& ca_pem);

// The rotation annotations as read, judged against what the Secret holds (`source`) before
// anything acts on them. What does not match is left out of (or clamped in) the state and
// told in `problems`:
//  - a phase while ca.crt holds fewer than two CAs: no rotation is under way, whatever the
//    annotation says (its times go with it);
//  - rotation-started or previous-ca-until with no phase: left over, ignored;
//  - previous-ca-until later than step 2 plus `ca_overlap`: clamped to that. Step 2 is when
//    the server certificate moved to the new CA, so the Secret proves it: the leaf's notBefore
//    plus pki::kClockSkewAllowance (certctl back-dates what it issues by that much); without a
//    readable leaf, `now`. Absent or not RFC 3339 while overlapping, it is set to that too.
RotationReading JudgeRotationState(RotationReading reading, const pki::PairSource& source,
                                   std::chrono::seconds ca_overlap, TimePoint now);

// "secret/ns/name: message; ..." for the log.
std::string DescribeProblems(const std::string& object,
                             const std::vector<RotationProblem>& problems);

}  // namespace certctl::controller
