#include "certctl/loop/event_series.h"

#include <chrono>

#include <gtest/gtest.h>

#include "certctl/loop/events.h"
#include "certctl/util/duration.h"

namespace certctl::loop {
namespace {

using kube::Json;
using std::chrono::seconds;

const TimePoint kNow = ParseRfc3339("2026-01-31T12:00:00Z").value();
const MonotonicTime kStart{};
const controller::ObjectReference kHook{"admissionregistration.k8s.io/v1",
                                        "ValidatingWebhookConfiguration", "", "hook", "uid-1"};

Json Injected(int second) {
  return MakeEvent(kHook, "CABundleInjected", "injected #" + std::to_string(second), "pod",
                   kNow + seconds(second));
}

TEST(EventSeries, RepeatsWithinTheIntervalComeOutAsOneEventWithTheirCount) {
  EventSeries series(seconds(60));
  ASSERT_TRUE(series.Admit(Injected(0), kStart));  // the first is told at once
  EXPECT_FALSE(series.NextDue());
  for (int second = 1; second <= 5; ++second) {
    EXPECT_FALSE(series.Admit(Injected(second), kStart + seconds(second)));
  }
  EXPECT_EQ(series.NextDue(), kStart + seconds(60));
  EXPECT_TRUE(series.Due(kStart + seconds(59)).empty());
  const std::vector<Json> due = series.Due(kStart + seconds(60));
  ASSERT_EQ(due.size(), 1U);
  EXPECT_EQ(due[0]["count"], 5);
  EXPECT_EQ(due[0]["message"], "injected #5");
  EXPECT_EQ(due[0]["firstTimestamp"], "2026-01-31T12:00:01Z");
  EXPECT_EQ(due[0]["lastTimestamp"], "2026-01-31T12:00:05Z");
  EXPECT_FALSE(series.NextDue());

  // Within the next interval: held again; after a quiet one: told at once.
  EXPECT_FALSE(series.Admit(Injected(70), kStart + seconds(70)));
  ASSERT_EQ(series.Due(kStart + seconds(120)).size(), 1U);
  EXPECT_TRUE(series.Due(kStart + seconds(181)).empty());
  EXPECT_TRUE(series.Admit(Injected(200), kStart + seconds(200)));
}

TEST(EventSeries, SeriesAreApartByReasonTypeAndObject) {
  EventSeries series(seconds(60));
  EXPECT_TRUE(series.Admit(Injected(0), kStart));
  EXPECT_TRUE(series.Admit(
      MakeEvent(kHook, "CABundleOverwritten", "x", "pod", kNow, EventType::kWarning), kStart));
  controller::ObjectReference other = kHook;
  other.name = "other";
  EXPECT_TRUE(series.Admit(MakeEvent(other, "CABundleInjected", "x", "pod", kNow), kStart));
  EXPECT_FALSE(series.Admit(Injected(1), kStart + seconds(1)));
  series.Clear();
  EXPECT_FALSE(series.NextDue());
  EXPECT_TRUE(series.Admit(Injected(2), kStart + seconds(2)));
}

}  // namespace
}  // namespace certctl::loop
