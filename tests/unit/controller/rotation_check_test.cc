#include "certctl/controller/rotation_check.h"

#include <chrono>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/pki/certificate.h"
#include "certctl/pki/issue.h"
#include "certctl/util/duration.h"

#include "fakes/fake_clock.h"
#include "support/test_pki.h"

namespace certctl::controller {
namespace rotation_check_test {
namespace {

using certctl::testing::CaBuilder;
using certctl::testing::FakeClock;
using certctl::testing::LeafBuilder;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr std::chrono::hours kDay{24};

pki::KeyPair MustCa(const std::string& name, TimePoint now) {
  return CaBuilder(name).At(now).Build();
}

pki::KeyPair MustLeaf(const pki::KeyPair& ca, TimePoint now) {
  return LeafBuilder(ca).At(now).Build();
}

RotationReading Reading(RotationPhase phase, std::optional<TimePoint> until = std::nullopt) {
  RotationReading reading;
  reading.state.phase = phase;
  reading.state.previous_ca_until = until;
  return reading;
}

struct Pair {
  FakeClock clock;
  pki::KeyPair old_ca = MustCa("old", clock.Now());
  pki::KeyPair new_ca = MustCa("new", clock.Now());
  pki::KeyPair leaf = MustLeaf(new_ca, clock.Now());

  pki::PairSource Source(bool two_cas) const {
    pki::PairSource source;
    source.ca_pem = two_cas ? pki::EncodeCertificateBundle({new_ca.certificate, old_ca.certificate})
                            : new_ca.certificate.ToPem();
    source.cert_pem = leaf.certificate.ToPem();
    auto key = new_ca.key.ToPem();
    EXPECT_TRUE(key.has_value());
    source.ca_key_pem = key.value_or("");
    return source;
  }
};

TEST(JudgeRotationState, APhaseWithOneCaInCaCrtIsIgnoredWithItsTimes) {
  const Pair pair;
  RotationReading reading = Reading(RotationPhase::kTrusting, pair.clock.Now());
  reading.state.requested = RotationRequest::kLeaf;
  const RotationReading judged =
      JudgeRotationState(reading, pair.Source(false), kDay, pair.clock.Now());
  EXPECT_EQ(judged.state.phase, RotationPhase::kNone);
  EXPECT_FALSE(judged.state.previous_ca_until.has_value());
  EXPECT_EQ(judged.state.requested, RotationRequest::kLeaf);  // a request is not state
  EXPECT_THAT(judged.problems,
              ElementsAre(AllOf(Field(&RotationProblem::annotation, kRotationPhaseAnnotation),
                                Field(&RotationProblem::message, HasSubstr("1 CA(s)")))));
}

TEST(JudgeRotationState, TimesWithNoPhaseAreLeftOvers) {
  const Pair pair;
  RotationReading reading = Reading(RotationPhase::kNone, pair.clock.Now());
  const RotationReading judged =
      JudgeRotationState(reading, pair.Source(false), kDay, pair.clock.Now());
  EXPECT_EQ(judged.state, RotationState{});
  EXPECT_THAT(judged.problems,
              ElementsAre(Field(&RotationProblem::annotation, kPreviousCaUntilAnnotation)));
}

TEST(JudgeRotationState, PreviousCaUntilIsBoundByTheLeafsIssuancePlusTheOverlap) {
  const Pair pair;
  // The leaf was issued now, back-dated by the skew allowance: step 2 was now.
  const TimePoint latest = pair.clock.Now() + kDay;
  const RotationReading within = JudgeRotationState(Reading(RotationPhase::kOverlapping, latest),
                                                    pair.Source(true), kDay, pair.clock.Now());
  EXPECT_THAT(within.problems, IsEmpty());
  EXPECT_EQ(within.state.previous_ca_until, latest);

  const TimePoint far = ParseRfc3339("9999-12-31T23:59:59Z").value();
  const RotationReading clamped = JudgeRotationState(Reading(RotationPhase::kOverlapping, far),
                                                     pair.Source(true), kDay, pair.clock.Now());
  EXPECT_EQ(clamped.state.previous_ca_until, latest);
  EXPECT_THAT(clamped.problems,
              ElementsAre(AllOf(Field(&RotationProblem::annotation, kPreviousCaUntilAnnotation),
                                Field(&RotationProblem::message, HasSubstr("clamped")))));

  // Judged later, the bound stays where the Secret proves it.
  const RotationReading later = JudgeRotationState(
      Reading(RotationPhase::kOverlapping, far), pair.Source(true), kDay, pair.clock.Now() + kDay);
  EXPECT_EQ(later.state.previous_ca_until, latest);
}

TEST(PruneNonCaCertificates, KeepsTheCasInOrderAndNamesWhatItRemoved) {
  const Pair pair;
  const std::string leaf = pair.leaf.certificate.ToPem();
  const std::string cas =
      pki::EncodeCertificateBundle({pair.new_ca.certificate, pair.old_ca.certificate});
  const auto pruned = PruneNonCaCertificates(leaf + cas);
  ASSERT_TRUE(pruned.has_value());
  EXPECT_EQ(pruned->pem, cas);
  EXPECT_THAT(pruned->removed, ElementsAre(HasSubstr("svc.ns.svc")));
  EXPECT_FALSE(PruneNonCaCertificates(cas).has_value());   // nothing to prune
  EXPECT_FALSE(PruneNonCaCertificates(leaf).has_value());  // nothing to keep
  EXPECT_FALSE(PruneNonCaCertificates("garbage").has_value());
}

TEST(JudgeRotationState, ATrustingPhaseWhoseLeafIsFromTheNewCaIsReadAsOverlapping) {
  const Pair pair;
  const TimePoint latest = pair.clock.Now() + kDay;
  // Set back to "trusting" by hand after step 2: the overlap must not end now.
  const RotationReading judged = JudgeRotationState(Reading(RotationPhase::kTrusting, latest),
                                                    pair.Source(true), kDay, pair.clock.Now());
  EXPECT_EQ(judged.state.phase, RotationPhase::kOverlapping);
  EXPECT_EQ(judged.state.previous_ca_until, latest);
  EXPECT_THAT(judged.problems,
              ElementsAre(AllOf(
                  Field(&RotationProblem::annotation, kRotationPhaseAnnotation),
                  Field(&RotationProblem::message, HasSubstr("already from the new CA; read as "
                                                             "\"overlapping\"")))));

  // Without previous-ca-until, the overlap is the one certctl would have written.
  const RotationReading bare = JudgeRotationState(Reading(RotationPhase::kTrusting),
                                                  pair.Source(true), kDay, pair.clock.Now());
  EXPECT_EQ(bare.state.phase, RotationPhase::kOverlapping);
  EXPECT_EQ(bare.state.previous_ca_until, latest);
}

TEST(JudgeRotationState, ATrustingPhaseWhoseLeafIsFromThePreviousCaStaysTrusting) {
  Pair pair;
  pair.leaf = MustLeaf(pair.old_ca, pair.clock.Now());
  const RotationReading judged = JudgeRotationState(Reading(RotationPhase::kTrusting),
                                                    pair.Source(true), kDay, pair.clock.Now());
  EXPECT_EQ(judged.state.phase, RotationPhase::kTrusting);
  EXPECT_THAT(judged.problems, IsEmpty());
}

}  // namespace
}  // namespace rotation_check_test
}  // namespace certctl::controller
