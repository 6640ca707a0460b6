#include "certctl/loop/event_series.h"

#include <chrono>

#include <gtest/gtest.h>

#include "certctl/loop/events.h"
#include "certctl/util/duration.h"

namespace certctl::loop {
namespace event_series_test {
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

TEST(EventSeries, OneEventPerSeriesItsCountUpdatedAtOnceThenOncePerInterval) {
  EventSeries series(seconds(60));
  const auto first = series.Admit(Injected(0), kStart);  // the first is created at once
  ASSERT_TRUE(first);
  EXPECT_EQ(first->name, "");
  const std::string name = first->event["metadata"]["name"];
  EXPECT_FALSE(series.NextDue());

  // The first repeat counts at once: a patch of the same Event.
  const auto second = series.Admit(Injected(1), kStart + seconds(1));
  ASSERT_TRUE(second);
  EXPECT_EQ(second->name, name);
  EXPECT_EQ(second->ns, "default");
  EXPECT_EQ(
      second->patch,
      (Json{{"count", 2}, {"message", "injected #1"}, {"lastTimestamp", "2026-01-31T12:00:01Z"}}));

  // The next ones are held until the interval since that write has passed.
  for (int at = 2; at <= 5; ++at) {
    EXPECT_FALSE(series.Admit(Injected(at), kStart + seconds(at)));
  }
  EXPECT_EQ(series.NextDue(), kStart + seconds(61));
  EXPECT_TRUE(series.Due(kStart + seconds(60)).empty());
  const std::vector<EventSeries::Write> due = series.Due(kStart + seconds(61));
  ASSERT_EQ(due.size(), 1U);
  EXPECT_EQ(due[0].name, name);
  EXPECT_EQ(due[0].patch["count"], 6);
  EXPECT_EQ(due[0].patch["message"], "injected #5");
  EXPECT_EQ(due[0].patch["lastTimestamp"], "2026-01-31T12:00:05Z");
  EXPECT_EQ(due[0].event["firstTimestamp"], "2026-01-31T12:00:00Z");
  EXPECT_FALSE(series.NextDue());

  // A repeat after a quiet interval is written at once, to the same Event.
  const auto later = series.Admit(Injected(130), kStart + seconds(130));
  ASSERT_TRUE(later);
  EXPECT_EQ(later->name, name);
  EXPECT_EQ(later->patch["count"], 7);

  // Quiet for ten minutes, the series ends: the next one is a new Event.
  EXPECT_TRUE(series.Due(kStart + seconds(130 + 600)).empty());
  const auto anew = series.Admit(Injected(800), kStart + seconds(800));
  ASSERT_TRUE(anew);
  EXPECT_EQ(anew->name, "");
  EXPECT_EQ(anew->event["count"], 1);
}

TEST(EventSeries, AnEventCreatedAgainIsTheOneTheSeriesCounts) {
  EventSeries series(seconds(60));
  const auto first = series.Admit(Injected(0), kStart);
  ASSERT_TRUE(first);
  series.Recreated(first->key, "hook.recreated");
  const auto second = series.Admit(Injected(1), kStart + seconds(1));
  ASSERT_TRUE(second);
  EXPECT_EQ(second->name, "hook.recreated");
}

TEST(EventSeries, SeriesAreApartByReasonTypeAndObject) {
  EventSeries series(seconds(60));
  EXPECT_TRUE(series.Admit(Injected(0), kStart));
  EXPECT_TRUE(series.Admit(
      MakeEvent(kHook, "CABundleOverwritten", "x", "pod", kNow, EventType::kWarning), kStart));
  controller::ObjectReference other = kHook;
  other.name = "other";
  EXPECT_TRUE(series.Admit(MakeEvent(other, "CABundleInjected", "x", "pod", kNow), kStart));
  const auto repeat = series.Admit(Injected(1), kStart + seconds(1));
  ASSERT_TRUE(repeat);
  EXPECT_NE(repeat->name, "");  // counted on the first series' Event
  series.Clear();
  EXPECT_FALSE(series.NextDue());
  const auto after = series.Admit(Injected(2), kStart + seconds(2));
  ASSERT_TRUE(after);
  EXPECT_EQ(after->name, "");  // a new Event
}

}  // namespace
}  // namespace event_series_test
}  // namespace certctl::loop
