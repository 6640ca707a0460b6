#include "certctl/loop/damping.h"

#include <chrono>

#include <gtest/gtest.h>

namespace certctl::loop {
namespace damping_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const MonotonicTime kStart{};
const std::string kHook = "validatingwebhookconfiguration/hook";

TEST(RepairDamper, TheFirstRepairsGoAtOnceThenTheWaitDoublesUpToTheCap) {
  RepairDamper damper;
  MonotonicTime now = kStart;
  EXPECT_FALSE(damper.HeldUntil(kHook, now));
  EXPECT_EQ(damper.Repaired(kHook, now), 1);
  EXPECT_FALSE(damper.HeldUntil(kHook, now + milliseconds(1)));
  EXPECT_EQ(damper.Repaired(kHook, now + milliseconds(100)), 2);
  EXPECT_FALSE(damper.Contested(kHook));
  now += milliseconds(200);
  EXPECT_EQ(damper.Repaired(kHook, now), 3);
  EXPECT_TRUE(damper.Contested(kHook));
  EXPECT_EQ(damper.HeldUntil(kHook, now), now + seconds(1));
  for (const seconds wait :
       {seconds(2), seconds(4), seconds(8), seconds(16), seconds(32), seconds(60), seconds(60)}) {
    now = *damper.HeldUntil(kHook, now);
    EXPECT_FALSE(damper.HeldUntil(kHook, now));
    damper.Repaired(kHook, now);
    EXPECT_EQ(damper.HeldUntil(kHook, now), now + wait);
  }
}

TEST(RepairDamper, AQuietPeriodStartsANewRowAndOtherObjectsAreApart) {
  RepairDamper damper;
  MonotonicTime now = kStart;
  for (int i = 0; i < 5; ++i) {
    now += milliseconds(100);
    damper.Repaired(kHook, now);
  }
  ASSERT_TRUE(damper.HeldUntil(kHook, now));
  EXPECT_FALSE(damper.HeldUntil("apiservice/v1.example.com", now));
  EXPECT_EQ(damper.NextRelease(now), damper.HeldUntil(kHook, now));

  // The same writer again, after 30 s without a repair: the fight was over.
  now += RepairPolicy{}.quiet + milliseconds(1);
  damper.Sighted(kHook, "argocd-controller", now);
  EXPECT_FALSE(damper.HeldUntil(kHook, now));
  EXPECT_FALSE(damper.NextRelease(now));
  EXPECT_EQ(damper.Repaired(kHook, now), 1);
  EXPECT_FALSE(damper.Contested(kHook));
}

TEST(RepairDamper, AChangeByAnotherWriterIsRepairedAtOnceWhateverTheFightBefore) {
  RepairDamper damper;
  MonotonicTime now = kStart;
  for (int i = 0; i < 6; ++i) {
    now += milliseconds(100);
    damper.Sighted(kHook, "kubectl-patch", now);
    damper.Repaired(kHook, now);
  }
  ASSERT_TRUE(damper.HeldUntil(kHook, now));
  // Within the quiet window the same writer is the same fight, whichever pass finds it.
  damper.Sighted(kHook, "kubectl-patch", now + seconds(5));
  damper.Sighted(kHook, "helm", now + seconds(6));  // found again: still the first change
  EXPECT_TRUE(damper.HeldUntil(kHook, now + seconds(6)));
  now = *damper.HeldUntil(kHook, now + seconds(6));
  EXPECT_EQ(damper.Repaired(kHook, now), 7);

  // Then helm writes once, 20 s later: a new row, repaired at once, and it starts over.
  now += seconds(20);
  damper.Sighted(kHook, "helm", now);
  EXPECT_FALSE(damper.HeldUntil(kHook, now));
  EXPECT_EQ(damper.Repaired(kHook, now), 1);
  EXPECT_FALSE(damper.Contested(kHook));
  // A writer certctl cannot name does not end a fight on its own.
  damper.Sighted(kHook, "", now + seconds(1));
  EXPECT_EQ(damper.Repaired(kHook, now + seconds(1)), 2);
}

// Two writers taking turns, each change another writer's than the one before: each is a
// first change, yet no more than 12 repairs a minute.
TEST(RepairDamper, WritersTakingTurnsStillGetAtMostTwelveRepairsAMinute) {
  RepairDamper damper;
  int repairs = 0;
  MonotonicTime sighted_at = kStart;
  for (MonotonicTime now = kStart; now < kStart + seconds(60); now += milliseconds(100)) {
    damper.Sighted(kHook, repairs % 2 == 0 ? "argocd" : "flux", now);
    if (!damper.HoldsBack(kHook, now)) {
      damper.Repaired(kHook, now);
      ++repairs;
    }
    sighted_at = now;
  }
  EXPECT_EQ(repairs, 12);
  EXPECT_EQ(damper.HeldUntil(kHook, sighted_at), kStart + seconds(60));
}

// A writer resetting the field every 100 ms for a minute, the loop repairing whenever it
// may: a handful of writes, not six hundred.
TEST(RepairDamper, AMinuteOfResetsEvery100msGetsAFewRepairs) {
  RepairDamper damper;
  int repairs = 0;
  for (MonotonicTime now = kStart; now < kStart + seconds(60); now += milliseconds(100)) {
    if (!damper.HeldUntil(kHook, now)) {
      damper.Repaired(kHook, now);
      ++repairs;
    }
  }
  EXPECT_GE(repairs, 3);
  EXPECT_LE(repairs, 10);
}

TEST(RepairDamper, RemembersWhatItWroteFieldByField) {
  RepairDamper damper;
  const std::string secret = "secret/infra/webhook-server-cert";
  EXPECT_FALSE(damper.Overwritten(secret, "tls.crt", "anything"));  // never written: no fight
  damper.Wrote(secret, "tls.crt", "leaf");
  damper.Wrote(secret, "ca.crt", "ca");
  damper.Wrote(kHook, "caBundle", "ca");
  EXPECT_FALSE(damper.Overwritten(secret, "tls.crt", "leaf"));
  EXPECT_TRUE(damper.Overwritten(secret, "tls.crt", "garbage"));
  EXPECT_TRUE(damper.Overwritten(secret, "tls.crt", ""));  // removed
  EXPECT_FALSE(damper.Overwritten(secret, "ca.crt", "ca"));
  EXPECT_FALSE(damper.Overwritten(kHook, "failurePolicy", ""));  // another field, never written
  damper.Wrote(secret, "tls.crt", "renewed leaf");
  EXPECT_TRUE(damper.Overwritten(secret, "tls.crt", "leaf"));
}

// The fields of one object share its row: a fight over two of them is not repaired twice as
// often.
TEST(RepairDamper, FieldsOfOneObjectShareItsRow) {
  RepairDamper damper;
  MonotonicTime now = kStart;
  damper.Repaired(kHook, now);  // caBundle
  damper.Repaired(kHook, now);  // failurePolicy, in the same pass
  damper.Repaired(kHook, now + milliseconds(100));
  EXPECT_TRUE(damper.Contested(kHook));
  EXPECT_TRUE(damper.HoldsBack(kHook, now + milliseconds(200)));
}

}  // namespace
}  // namespace damping_test
}  // namespace certctl::loop
