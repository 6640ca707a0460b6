#include "certctl/loop/events.h"

#include <chrono>

#include <gtest/gtest.h>

#include "certctl/util/duration.h"

#include "fakes/fake_client.h"
#include "fakes/fake_clock.h"

namespace certctl::loop {
namespace events_test {
namespace {

using certctl::testing::FakeClient;
using certctl::testing::FakeClock;
using certctl::testing::Verb;
using kube::Json;

const TimePoint kNow = ParseRfc3339("2026-01-31T12:00:00Z").value();

// WriteSeriesEvent's `recreated`, told to `series` as EventRecorder tells its own.
std::function<void(const std::string&)> TellRecreated(EventSeries& series,
                                                      const EventSeries::Write& write) {
  return [&series, key = write.key](const std::string& name) { series.Recreated(key, name); };
}

TEST(Events, AnEventNamesItsObjectTheWayKubectlDescribeLooksItUp) {
  const controller::ObjectReference vwc{"admissionregistration.k8s.io/v1",
                                        "ValidatingWebhookConfiguration", "", "hook", "uid-1"};
  const Json event = MakeEvent(vwc, "CABundleInjected", "injected the CA bundle", "pod-a_x1", kNow);
  // The API server takes events about cluster-scoped objects only in "default".
  EXPECT_EQ(event["metadata"]["namespace"], "default");
  EXPECT_EQ(event["metadata"]["name"], "hook.188fcf053de38000");
  EXPECT_EQ(event["involvedObject"], (Json{{"apiVersion", "admissionregistration.k8s.io/v1"},
                                           {"kind", "ValidatingWebhookConfiguration"},
                                           {"name", "hook"},
                                           {"uid", "uid-1"}}));
  EXPECT_EQ(event["type"], "Normal");
  EXPECT_EQ(event["reason"], "CABundleInjected");
  EXPECT_EQ(event["source"]["component"], "certctl");
  EXPECT_EQ(event["reportingInstance"], "pod-a_x1");
  EXPECT_EQ(event["firstTimestamp"], "2026-01-31T12:00:00Z");
  EXPECT_EQ(event["count"], 1);
}

TEST(Events, ARepeatedEventIsRecordedOnceAndFailuresAreReturned) {
  FakeClient api;
  const controller::ObjectReference secret{"v1", "Secret", "infra", "cert", ""};
  const Json event = MakeEvent(secret, "Created", "created", "certctl", kNow);
  EXPECT_EQ(event["metadata"]["namespace"], "infra");
  EXPECT_FALSE(event["involvedObject"].contains("uid"));
  EXPECT_EQ(event["involvedObject"]["namespace"], "infra");
  ASSERT_TRUE(RecordEvent(api, event));
  ASSERT_TRUE(RecordEvent(api, event));  // a retried create: AlreadyExists is success
  EXPECT_EQ(api.CountOf(Verb::kCreate, kube::kEvents), 2);
  EXPECT_TRUE(api.Object(kube::kEvents, "infra", event["metadata"]["name"].get<std::string>()));

  api.InjectFailure(Verb::kCreate, kube::kEvents,
                    Error(ErrorCode::kPermissionDenied, "events is forbidden"));
  const auto denied = RecordEvent(api, MakeEvent(secret, "Created", "x", "c", kNow));
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().message(), "record event Created: events is forbidden");
}

TEST(Events, ASeriesCountsOnItsOneEventAndCreatesItAgainWhenItIsGone) {
  FakeClient api;
  EventSeries series;
  const controller::ObjectReference secret{"v1", "Secret", "infra", "cert", ""};
  const MonotonicTime start{};
  const auto reissued = [&](int second) {
    return series.Admit(MakeEvent(secret, "LeafReissued", "re-issued #" + std::to_string(second),
                                  "certctl", kNow + std::chrono::seconds(second)),
                        start + std::chrono::seconds(second));
  };
  const auto first = reissued(0);
  ASSERT_TRUE(first);
  ASSERT_TRUE(WriteSeriesEvent(api, *first, kNow, TellRecreated(series, *first)));
  const std::string name = first->event["metadata"]["name"];
  const auto second = reissued(1);
  ASSERT_TRUE(second);
  ASSERT_TRUE(WriteSeriesEvent(api, *second, kNow, TellRecreated(series, *second)));
  EXPECT_EQ(api.CountOf(Verb::kCreate, kube::kEvents), 1);
  const auto stored = api.Object(kube::kEvents, "infra", name);
  ASSERT_TRUE(stored);
  EXPECT_EQ((*stored)["count"], 2);
  EXPECT_EQ((*stored)["message"], "re-issued #1");
  EXPECT_EQ((*stored)["firstTimestamp"], "2026-01-31T12:00:00Z");

  // Gone (the API server's time to live): created again with the count so far, and the
  // series goes on counting there.
  ASSERT_TRUE(api.Delete(kube::kEvents, "infra", name));
  ASSERT_TRUE(series.Due(start + std::chrono::seconds(1)).empty());
  ASSERT_FALSE(reissued(2));  // held: within the interval
  const auto held = series.Due(start + std::chrono::minutes(2));
  ASSERT_EQ(held.size(), 1U);
  const TimePoint later = kNow + std::chrono::minutes(2);
  ASSERT_TRUE(WriteSeriesEvent(api, held[0], later, TellRecreated(series, held[0])));
  EXPECT_EQ(api.CountOf(Verb::kCreate, kube::kEvents), 2);
  ASSERT_FALSE(reissued(130));
  const auto next = series.Due(start + std::chrono::seconds(181));
  ASSERT_EQ(next.size(), 1U);
  EXPECT_NE(next[0].name, name);
  const auto again = api.Object(kube::kEvents, "infra", next[0].name);
  ASSERT_TRUE(again);
  EXPECT_EQ((*again)["count"], 3);
}

TEST(Events, ARoleThatMayOnlyCreateEventsStillGetsEveryRepeatTold) {
  FakeClient api;
  EventSeries series;
  const controller::ObjectReference secret{"v1", "Secret", "infra", "cert", ""};
  const auto first = series.Admit(MakeEvent(secret, "Repaired", "#0", "certctl", kNow), {});
  ASSERT_TRUE(first);
  ASSERT_TRUE(WriteSeriesEvent(api, *first, kNow, TellRecreated(series, *first)));
  api.InjectFailure(Verb::kPatch, kube::kEvents,
                    Error(ErrorCode::kPermissionDenied, "events is forbidden"), 1);
  const auto repeat = series.Admit(MakeEvent(secret, "Repaired", "#1", "certctl", kNow),
                                   MonotonicTime{} + std::chrono::seconds(1));
  ASSERT_TRUE(repeat);
  const TimePoint later = kNow + std::chrono::seconds(1);
  const Status written = WriteSeriesEvent(api, *repeat, later, TellRecreated(series, *repeat));
  ASSERT_FALSE(written);  // the refusal, for the log
  EXPECT_EQ(written.error().message(),
            "count event Repaired (told as a new Event instead): events is forbidden");
  EXPECT_EQ(api.CountOf(Verb::kCreate, kube::kEvents), 2);
  const std::string name = first->event["metadata"]["name"];
  const auto told = api.List(kube::kEvents, "infra", {});
  ASSERT_TRUE(told);
  ASSERT_EQ(told->at("items").size(), 2U);
  for (const kube::Json& event : told->at("items")) {
    EXPECT_EQ(event["count"], event["metadata"]["name"] == name ? 1 : 2) << event.dump();
  }
}

TEST(Events, InTheBackgroundEveryEventIsWrittenByTheEndAndAFailureIsTold) {
  FakeClient api;
  FakeClock fake_clock(kNow);
  std::vector<std::string> failed;
  const auto about = [](int i) {
    return controller::ObjectReference{"v1", "Secret", "infra", "cert-" + std::to_string(i), ""};
  };
  {
    EventRecorder recorder(
        api, fake_clock, [&](const std::string& message) { failed.push_back(message); },
        EventRecorder::Delivery::kBackground);
    for (int i = 0; i < 50; ++i) {
      recorder.Record(MakeEvent(about(i), "Created", "created", "certctl", fake_clock.Now()));
    }
  }  // the end writes what is still queued
  EXPECT_EQ(api.CountOf(Verb::kCreate, kube::kEvents), 50);
  EXPECT_TRUE(failed.empty());

  api.InjectFailure(Verb::kCreate, kube::kEvents,
                    Error(ErrorCode::kPermissionDenied, "events is forbidden"), 1);
  {
    EventRecorder recorder(
        api, fake_clock, [&](const std::string& message) { failed.push_back(message); },
        EventRecorder::Delivery::kBackground);
    recorder.Record(MakeEvent(about(100), "Created", "created", "certctl", fake_clock.Now()));
  }
  ASSERT_EQ(failed.size(), 1U);  // told, for the log
  EXPECT_EQ(failed[0], "record event Created: events is forbidden");
}

}  // namespace
}  // namespace events_test
}  // namespace certctl::loop
