#include "certctl/fleet/work_queue.h"

#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fakes/fake_clock.h"

namespace certctl::fleet {
namespace work_queue_test {
namespace {

using certctl::testing::FakeClock;
using std::chrono::milliseconds;

TEST(WorkQueue, AKeyIsQueuedOnceAndHandedOutInOrder) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.Add("a");
  queue.Add("b");
  queue.Add("a");
  EXPECT_EQ(queue.Ready(), 2U);
  EXPECT_EQ(queue.TryGet(), "a");
  EXPECT_EQ(queue.TryGet(), "b");
  EXPECT_EQ(queue.TryGet(), std::nullopt);
}

TEST(WorkQueue, AKeyAddedWhileWorkedOnComesBackOnlyWhenItsWorkerIsDone) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.Add("a");
  ASSERT_EQ(queue.TryGet(), "a");
  queue.Add("a");
  queue.Add("a");
  EXPECT_EQ(queue.TryGet(), std::nullopt);  // never two workers on one key
  queue.Done("a");
  EXPECT_EQ(queue.TryGet(), "a");
  queue.Done("a");
  EXPECT_EQ(queue.TryGet(), std::nullopt);
}

TEST(WorkQueue, ADelayedKeyIsDueAtItsTimeAndTheSoonerOfTwoTimesWins) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.AddAfter("a", milliseconds(1000));
  queue.AddAfter("a", milliseconds(300));
  queue.AddAfter("a", milliseconds(5000));
  EXPECT_EQ(queue.Waiting(), 1U);
  clock.Advance(milliseconds(299));
  EXPECT_EQ(queue.TryGet(), std::nullopt);
  clock.Advance(milliseconds(1));
  EXPECT_EQ(queue.TryGet(), "a");
  EXPECT_EQ(queue.Waiting(), 0U);
}

TEST(WorkQueue, AnAddNowOvertakesADelay) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.AddAfter("a", milliseconds(1000));
  queue.Add("a");
  EXPECT_EQ(queue.TryGet(), "a");
  queue.Done("a");
  clock.Advance(milliseconds(1000));
  EXPECT_EQ(queue.TryGet(), std::nullopt);  // the delayed one was replaced, not kept
}

TEST(WorkQueue, FailuresBackOffPerKeyAndASuccessStartsOver) {
  FakeClock clock;
  WorkQueue queue(clock, RetryBackoff{milliseconds(100), milliseconds(350)});
  EXPECT_EQ(queue.Retry("broken"), milliseconds(100));
  EXPECT_EQ(queue.Retry("broken"), milliseconds(200));
  EXPECT_EQ(queue.Retry("broken"), milliseconds(350));  // capped
  EXPECT_EQ(queue.Retry("other"), milliseconds(100));   // its own
  queue.Forget("broken");
  EXPECT_EQ(queue.Retry("broken"), milliseconds(100));
}

TEST(WorkQueue, ShutDownWakesABlockedWorker) {
  FakeClock clock;
  WorkQueue queue(clock);
  std::optional<std::string> got = "unset";
  std::thread worker([&] { got = queue.Get(); });
  queue.ShutDown();
  worker.join();
  EXPECT_EQ(got, std::nullopt);
}

TEST(WorkQueue, AWorkerBlockedInGetTakesAKeyAddedLater) {
  FakeClock clock;
  WorkQueue queue(clock);
  std::optional<std::string> got;
  std::thread worker([&] { got = queue.Get(); });
  queue.Add("a");
  worker.join();
  EXPECT_EQ(got, "a");
}

}  // namespace
}  // namespace work_queue_test
}  // namespace certctl::fleet
