#include "kube/rate_limiter.h"

#include <vector>

#include <gtest/gtest.h>

#include "fakes/fake_clock.h"

namespace certctl::kube {
namespace rate_limiter_test {
namespace {

using certctl::testing::FakeClock;
using std::chrono::milliseconds;

TEST(RateLimiter, AllowsBurstThenSpacesAtOneOverQps) {
  FakeClock clock;
  RateLimiter limiter(5.0, 10, clock);
  for (int i = 0; i < 10; ++i) {
    limiter.Acquire();
  }
  EXPECT_TRUE(clock.sleeps().empty());
  for (int i = 0; i < 5; ++i) {
    limiter.Acquire();
  }
  EXPECT_EQ(clock.sleeps(), std::vector<milliseconds>(5, milliseconds(200)));
}

TEST(RateLimiter, RefillsWhileIdleButNeverBeyondBurst) {
  FakeClock clock;
  RateLimiter limiter(5.0, 3, clock);
  for (int i = 0; i < 3; ++i) {
    limiter.Acquire();
  }
  clock.Advance(std::chrono::seconds(3600));
  for (int i = 0; i < 3; ++i) {
    limiter.Acquire();
  }
  EXPECT_TRUE(clock.sleeps().empty());
  limiter.Acquire();
  EXPECT_EQ(clock.sleeps(), std::vector<milliseconds>{milliseconds(200)});
}

TEST(RateLimiter, PartialRefillShortensTheWait) {
  FakeClock clock;
  RateLimiter limiter(2.0, 1, clock);
  limiter.Acquire();
  clock.Set(clock.Now() + milliseconds(300));
  limiter.Acquire();  // 0.6 tokens there, 0.4 missing at 2/s: 200 ms
  EXPECT_EQ(clock.sleeps(), std::vector<milliseconds>{milliseconds(200)});
}

TEST(RateLimiter, DelayReportsWithoutTaking) {
  FakeClock clock;
  RateLimiter limiter(10.0, 1, clock);
  EXPECT_EQ(limiter.Delay(), milliseconds(0));
  limiter.Acquire();
  EXPECT_EQ(limiter.Delay(), milliseconds(100));
  EXPECT_EQ(limiter.Delay(), milliseconds(100));
  EXPECT_TRUE(clock.sleeps().empty());
}

TEST(RateLimiter, ZeroQpsMeansUnlimited) {
  FakeClock clock;
  RateLimiter limiter(0, 1, clock);
  for (int i = 0; i < 1000; ++i) {
    limiter.Acquire();
  }
  EXPECT_TRUE(clock.sleeps().empty());
}

}  // namespace
}  // namespace rate_limiter_test
}  // namespace certctl::kube
