#include "certctl/leader/elector.h"

#include <chrono>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/util/duration.h"

#include "fakes/fake_client.h"
#include "fakes/fake_clock.h"

namespace certctl::leader {
namespace elector_test {
namespace {

using certctl::testing::FakeClient;
using certctl::testing::FakeClock;
using certctl::testing::Verb;
using ::testing::MatchesRegex;
using namespace std::chrono_literals;

constexpr char kNs[] = "infra";
constexpr char kLease[] = "webhook-server-cert-certctl";

ElectionConfig Config(const std::string& identity) { return ElectionConfig{kNs, kLease, identity}; }

kube::Json Spec(const FakeClient& api) {
  return api.Object(kube::kLeases, kNs, kLease).value()["spec"];
}

TEST(Elector, TheFirstCandidateCreatesTheLease) {
  FakeClient api;
  FakeClock clock;
  Elector elector(api, clock, Config("pod-a_x1"));
  EXPECT_FALSE(elector.IsLeader());
  ASSERT_TRUE(elector.TryAcquireOrRenew().value());
  EXPECT_TRUE(elector.IsLeader());
  const kube::Json spec = Spec(api);
  EXPECT_EQ(spec["holderIdentity"], "pod-a_x1");
  EXPECT_EQ(spec["leaseDurationSeconds"], 15);
  EXPECT_EQ(spec["leaseTransitions"], 0);
  EXPECT_EQ(spec["acquireTime"], FormatMicroTime(clock.Now()));
  EXPECT_EQ(spec["renewTime"], spec["acquireTime"]);
  EXPECT_EQ(elector.NextAttemptIn(), 2s);
}

TEST(Elector, TheHolderRenewsWithoutATransition) {
  FakeClient api;
  FakeClock clock;
  Elector elector(api, clock, Config("pod-a"));
  ASSERT_TRUE(elector.TryAcquireOrRenew().value());
  const std::string acquired = Spec(api)["acquireTime"];
  clock.Advance(2s);
  ASSERT_TRUE(elector.TryAcquireOrRenew().value());
  EXPECT_EQ(Spec(api)["acquireTime"], acquired);
  EXPECT_EQ(Spec(api)["renewTime"], FormatMicroTime(clock.Now()));
  EXPECT_EQ(Spec(api)["leaseTransitions"], 0);
}

TEST(Elector, ACandidateWaitsOutALiveHolderAndTakesOverASilentOne) {
  FakeClient api;
  FakeClock clock;
  Elector leader(api, clock, Config("pod-a"));
  Elector candidate(api, clock, Config("pod-b"));
  ASSERT_TRUE(leader.TryAcquireOrRenew().value());

  EXPECT_FALSE(candidate.TryAcquireOrRenew().value());
  EXPECT_EQ(candidate.observed_holder(), "pod-a");
  EXPECT_GE(candidate.NextAttemptIn(), 2s);
  EXPECT_LE(candidate.NextAttemptIn(), 4400ms);
  // The holder keeps renewing: the record changes, so the candidate's clock restarts.
  for (int i = 0; i < 10; ++i) {
    clock.Advance(2s);
    ASSERT_TRUE(leader.TryAcquireOrRenew().value());
    EXPECT_FALSE(candidate.TryAcquireOrRenew().value());
  }
  // Silence: 14s after the candidate last saw a change, still held; at 15s, taken.
  clock.Advance(14s);
  EXPECT_FALSE(candidate.TryAcquireOrRenew().value());
  clock.Advance(1s);
  ASSERT_TRUE(candidate.TryAcquireOrRenew().value());
  EXPECT_EQ(Spec(api)["holderIdentity"], "pod-b");
  EXPECT_EQ(Spec(api)["leaseTransitions"], 1);
  EXPECT_EQ(Spec(api)["acquireTime"], FormatMicroTime(clock.Now()));
  // The old holder finds out on its next attempt, and has already stepped down by then.
  EXPECT_FALSE(leader.IsLeader());
  EXPECT_FALSE(leader.TryAcquireOrRenew().value());
}

TEST(Elector, ExpiryIsJudgedOnTheMonotonicClockNotTheRenewTime) {
  // The holder's renewTime is a day in the past (its node's clock is wrong), yet it renews:
  // the lease is live. A wall-clock jump on the candidate changes nothing either.
  FakeClient api;
  FakeClock clock;
  api.Put(kube::kLeases, {{"metadata", {{"name", kLease}, {"namespace", kNs}}},
                          {"spec",
                           {{"holderIdentity", "skewed"},
                            {"leaseDurationSeconds", 15},
                            {"renewTime", FormatMicroTime(clock.Now() - 24h)}}}});
  Elector candidate(api, clock, Config("pod-b"));
  EXPECT_FALSE(candidate.TryAcquireOrRenew().value());
  clock.Set(clock.Now() + 1h);
  EXPECT_FALSE(candidate.TryAcquireOrRenew().value());
  clock.Advance(15s);
  EXPECT_TRUE(candidate.TryAcquireOrRenew().value());
}

TEST(Elector, TheRecordsLeaseDurationIsHonoured) {
  FakeClient api;
  FakeClock clock;
  api.Put(kube::kLeases, {{"metadata", {{"name", kLease}, {"namespace", kNs}}},
                          {"spec", {{"holderIdentity", "pod-a"}, {"leaseDurationSeconds", 60}}}});
  Elector candidate(api, clock, Config("pod-b"));
  EXPECT_FALSE(candidate.TryAcquireOrRenew().value());
  clock.Advance(59s);
  EXPECT_FALSE(candidate.TryAcquireOrRenew().value());
  clock.Advance(1s);
  EXPECT_TRUE(candidate.TryAcquireOrRenew().value());
}

TEST(Elector, AReleasedLeaseIsTakenAtOnce) {
  FakeClient api;
  FakeClock clock;
  Elector leader(api, clock, Config("pod-a"));
  Elector candidate(api, clock, Config("pod-b"));
  ASSERT_TRUE(leader.TryAcquireOrRenew().value());
  EXPECT_FALSE(candidate.TryAcquireOrRenew().value());
  ASSERT_TRUE(leader.Release());
  EXPECT_FALSE(leader.IsLeader());
  EXPECT_FALSE(Spec(api).contains("holderIdentity"));
  EXPECT_EQ(Spec(api)["leaseDurationSeconds"], 1);
  EXPECT_TRUE(candidate.TryAcquireOrRenew().value());
  // Releasing what one does not hold writes nothing.
  api.ClearRequests();
  ASSERT_TRUE(leader.Release());
  EXPECT_EQ(api.WriteCount(), 0);
}

TEST(Elector, LosingARaceIsNotAnError) {
  FakeClient api;
  FakeClock clock;
  Elector candidate(api, clock, Config("pod-b"));
  // Another candidate created the lease between our read and our create...
  api.InjectFailure(Verb::kCreate, kube::kLeases,
                    Error(ErrorCode::kAlreadyExists, "leases \"x\" already exists"));
  EXPECT_FALSE(candidate.TryAcquireOrRenew().value());
  // ...or took the expired lease between our read and our update.
  api.Put(kube::kLeases, {{"metadata", {{"name", kLease}, {"namespace", kNs}}},
                          {"spec", {{"holderIdentity", "pod-a"}, {"leaseDurationSeconds", 15}}}});
  EXPECT_FALSE(candidate.TryAcquireOrRenew().value());
  clock.Advance(15s);
  api.InjectFailure(Verb::kUpdate, kube::kLeases,
                    Error(ErrorCode::kConflict, "the object has been modified"));
  EXPECT_FALSE(candidate.TryAcquireOrRenew().value());
  EXPECT_FALSE(candidate.IsLeader());
  EXPECT_EQ(Spec(api)["holderIdentity"], "pod-a");
}

TEST(Elector, AHolderThatCannotRenewStepsDownAtTheRenewDeadline) {
  FakeClient api;
  FakeClock clock;
  Elector leader(api, clock, Config("pod-a"));
  ASSERT_TRUE(leader.TryAcquireOrRenew().value());
  api.InjectFailure(Verb::kGet, kube::kLeases, Error(ErrorCode::kUnavailable, "503"), 100);
  for (int i = 0; i < 4; ++i) {
    clock.Advance(2s);
    EXPECT_FALSE(leader.TryAcquireOrRenew());
    EXPECT_TRUE(leader.IsLeader()) << i;
  }
  clock.Advance(2s);  // 10s since the last renewal, 5s before anyone may take over
  EXPECT_FALSE(leader.TryAcquireOrRenew());
  EXPECT_FALSE(leader.IsLeader());
}

TEST(Elector, AMalformedLeaseIsAnErrorNamingTheField) {
  FakeClient api;
  FakeClock clock;
  api.Put(kube::kLeases, {{"metadata", {{"name", kLease}, {"namespace", kNs}}},
                          {"spec", {{"holderIdentity", 7}}}});
  Elector candidate(api, clock, Config("pod-b"));
  const auto attempt = candidate.TryAcquireOrRenew();
  ASSERT_FALSE(attempt);
  EXPECT_EQ(attempt.error().code(), ErrorCode::kBadResponse);
  EXPECT_EQ(attempt.error().message(),
            "lease/infra/webhook-server-cert-certctl: spec.holderIdentity is a number, not a "
            "string");
}

TEST(MicroTime, SixFractionalDigitsInUtc) {
  const TimePoint time = ParseRfc3339("2026-01-31T12:00:00Z").value() + 1234us;
  EXPECT_EQ(FormatMicroTime(time), "2026-01-31T12:00:00.001234Z");
  EXPECT_THAT(FormatMicroTime(std::chrono::system_clock::now()),
              MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}Z"));
  EXPECT_EQ(ParseRfc3339(FormatMicroTime(time)).value(), time);
}

}  // namespace
}  // namespace elector_test
}  // namespace certctl::leader
