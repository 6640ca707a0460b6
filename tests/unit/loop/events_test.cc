#include "certctl/loop/events.h"

#include <chrono>

#include <gtest/gtest.h>

#include "certctl/util/duration.h"

#include "fakes/fake_client.h"

namespace certctl::loop {
namespace events_test {
namespace {

using certctl::testing::FakeClient;
using certctl::testing::Verb;
using kube::Json;

const TimePoint kNow = ParseRfc3339("2026-01-31T12:00:00Z").value();

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
  ASSERT_TRUE(WriteSeriesEvent(api, *first, series, kNow));
  const std::string name = first->event["metadata"]["name"];
  const auto second = reissued(1);
  ASSERT_TRUE(second);
  ASSERT_TRUE(WriteSeriesEvent(api, *second, series, kNow));
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
  ASSERT_TRUE(WriteSeriesEvent(api, held[0], series, later));
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
  ASSERT_TRUE(WriteSeriesEvent(api, *first, series, kNow));
  api.InjectFailure(Verb::kPatch, kube::kEvents,
                    Error(ErrorCode::kPermissionDenied, "events is forbidden"), 1);
  const auto repeat = series.Admit(MakeEvent(secret, "Repaired", "#1", "certctl", kNow),
                                   MonotonicTime{} + std::chrono::seconds(1));
  ASSERT_TRUE(repeat);
  const TimePoint later = kNow + std::chrono::seconds(1);
  const Status written = WriteSeriesEvent(api, *repeat, series, later);
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

}  // namespace
}  // namespace events_test
}  // namespace certctl::loop
