#include "certctl/fleet/own_writes.h"

#include <gtest/gtest.h>

#include "fakes/fake_client.h"

namespace certctl::fleet {
namespace {

using Json = nlohmann::json;
using certctl::testing::FakeClient;

Json Secret(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", {{"name", name}, {"namespace", "team-a"}}},
          {"data", {{"ca.crt", "Y2E="}}}};
}

Json WithVersion(Json object, const std::string& version) {
  object["metadata"]["resourceVersion"] = version;
  return object;
}

TEST(OwnWrites, TheEventOfItsOwnWriteIsAnEchoOnce) {
  FakeClient inner;
  OwnWrites client(inner);
  auto created = client.Create(kube::kSecrets, "team-a", Secret("hook-tls"));
  ASSERT_TRUE(created.has_value());
  const std::string version = (*created)["metadata"]["resourceVersion"];

  EXPECT_TRUE(client.IsEcho(kube::kSecrets, WithVersion(Secret("hook-tls"), version)));
  // Forgotten once recognised: the same version again is not taken for an echo twice.
  EXPECT_FALSE(client.IsEcho(kube::kSecrets, WithVersion(Secret("hook-tls"), version)));
}

TEST(OwnWrites, SomeoneElsesChangeIsNewsAndEndsTheRecord) {
  FakeClient inner;
  OwnWrites client(inner);
  auto created = client.Create(kube::kSecrets, "team-a", Secret("hook-tls"));
  ASSERT_TRUE(created.has_value());
  const std::string version = (*created)["metadata"]["resourceVersion"];

  EXPECT_FALSE(client.IsEcho(kube::kSecrets, WithVersion(Secret("hook-tls"), version + "1")));
  EXPECT_FALSE(client.IsEcho(kube::kSecrets, WithVersion(Secret("hook-tls"), version)));
  // Another object of the same name elsewhere, and another kind, are never its echo.
  auto again = client.Update(kube::kSecrets, "team-a", "hook-tls", Secret("hook-tls"));
  ASSERT_TRUE(again.has_value());
  Json elsewhere = WithVersion(Secret("hook-tls"), (*again)["metadata"]["resourceVersion"]);
  elsewhere["metadata"]["namespace"] = "team-b";
  EXPECT_FALSE(client.IsEcho(kube::kSecrets, elsewhere));
  EXPECT_FALSE(client.IsEcho(
      kube::kServices, WithVersion(Secret("hook-tls"), (*again)["metadata"]["resourceVersion"])));
}

TEST(OwnWrites, FailedWritesAndEventsLeaveNoRecord) {
  FakeClient inner;
  OwnWrites client(inner);
  auto event = client.Create(kube::kEvents, "team-a",
                             {{"apiVersion", "v1"},
                              {"kind", "Event"},
                              {"metadata", {{"name", "hook.1"}, {"namespace", "team-a"}}}});
  ASSERT_TRUE(event.has_value());
  EXPECT_FALSE(client.IsEcho(kube::kEvents, *event));

  inner.Put(kube::kSecrets, Secret("taken"));
  auto refused = client.Create(kube::kSecrets, "team-a", Secret("taken"));  // 409
  ASSERT_FALSE(refused.has_value());
  EXPECT_FALSE(client.IsEcho(kube::kSecrets, WithVersion(Secret("taken"), "1")));
}

}  // namespace
}  // namespace certctl::fleet
