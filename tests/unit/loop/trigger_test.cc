#include "certctl/loop/trigger.h"

#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace certctl::loop {
namespace trigger_test {
namespace {

using namespace std::chrono_literals;

TEST(Trigger, RequestsCoalesceIntoOnePassWithEveryReason) {
  Trigger trigger;
  trigger.Request("secret modified");
  trigger.Request("vwc/hook modified");
  trigger.Request("secret modified");
  const auto reasons = trigger.Wait(0ms);
  ASSERT_TRUE(reasons);
  EXPECT_EQ(*reasons, (std::set<std::string>{"secret modified", "vwc/hook modified"}));
  EXPECT_FALSE(trigger.Wait(0ms));  // consumed
}

TEST(Trigger, WaitTimesOutWithNothing) {
  Trigger trigger;
  EXPECT_FALSE(trigger.Wait(10ms));
}

TEST(Trigger, ARequestFromAnotherThreadWakesTheWaiter) {
  Trigger trigger;
  std::thread watcher([&] {
    std::this_thread::sleep_for(20ms);
    trigger.Request("lease acquired");
  });
  // Generous: the point is that the request ends the wait, not how fast.
  const auto reasons = trigger.Wait(60s);
  watcher.join();
  ASSERT_TRUE(reasons);
  EXPECT_EQ(reasons->count("lease acquired"), 1U);
}

TEST(Trigger, StopWakesTheWaiterForGood) {
  Trigger trigger;
  std::thread stopper([&] {
    std::this_thread::sleep_for(20ms);
    trigger.Stop();
  });
  EXPECT_FALSE(trigger.Wait(60s));
  stopper.join();
  EXPECT_TRUE(trigger.stopped());
  trigger.Request("too late");
  EXPECT_FALSE(trigger.Wait(0ms));
}

TEST(Trigger, ManyThreadsRequestingLoseNothing) {
  Trigger trigger;
  std::vector<std::thread> watchers;
  for (int t = 0; t < 4; ++t) {
    watchers.emplace_back([&trigger, t] {
      for (int i = 0; i < 100; ++i) {
        trigger.Request("watch " + std::to_string(t) + " event " + std::to_string(i % 10));
      }
    });
  }
  std::set<std::string> seen;
  for (auto& watcher : watchers) {
    watcher.join();
  }
  while (auto reasons = trigger.Wait(0ms)) {
    seen.insert(reasons->begin(), reasons->end());
  }
  EXPECT_EQ(seen.size(), 40U);
}

}  // namespace
}  // namespace trigger_test
}  // namespace certctl::loop
