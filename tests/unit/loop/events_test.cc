#include "certctl/loop/events.h"

#include <chrono>

#include <gtest/gtest.h>

#include "certctl/util/duration.h"

#include "fakes/fake_client.h"

namespace certctl::loop {
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

}  // namespace
}  // namespace certctl::loop
