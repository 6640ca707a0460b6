#include "certctl/fleet/object_copies.h"

#include <gtest/gtest.h>

#include "fakes/fake_client.h"

namespace certctl::fleet {
namespace {

using Json = nlohmann::json;
using certctl::testing::FakeClient;
using certctl::testing::Verb;

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

TEST(ObjectCopies, TheEventOfItsOwnWriteIsAnEchoOnce) {
  FakeClient inner;
  ObjectCopies client(inner);
  auto created = client.Create(kube::kSecrets, "team-a", Secret("hook-tls"));
  ASSERT_TRUE(created.has_value());
  const std::string version = (*created)["metadata"]["resourceVersion"];

  EXPECT_TRUE(client.IsEcho(kube::kSecrets, WithVersion(Secret("hook-tls"), version), "w"));
  // Forgotten once recognised: the same version again is not taken for an echo twice.
  EXPECT_FALSE(client.IsEcho(kube::kSecrets, WithVersion(Secret("hook-tls"), version), "w"));
}

TEST(ObjectCopies, SomeoneElsesChangeIsNewsAndEndsTheRecord) {
  FakeClient inner;
  ObjectCopies client(inner);
  auto created = client.Create(kube::kSecrets, "team-a", Secret("hook-tls"));
  ASSERT_TRUE(created.has_value());
  const std::string version = (*created)["metadata"]["resourceVersion"];

  EXPECT_FALSE(client.IsEcho(kube::kSecrets, WithVersion(Secret("hook-tls"), version + "1"), "w"));
  EXPECT_FALSE(client.IsEcho(kube::kSecrets, WithVersion(Secret("hook-tls"), version), "w"));
  // Another object of the same name elsewhere, and another kind, are never its echo.
  auto again = client.Update(kube::kSecrets, "team-a", "hook-tls", Secret("hook-tls"));
  ASSERT_TRUE(again.has_value());
  Json elsewhere = WithVersion(Secret("hook-tls"), (*again)["metadata"]["resourceVersion"]);
  elsewhere["metadata"]["namespace"] = "team-b";
  EXPECT_FALSE(client.IsEcho(kube::kSecrets, elsewhere, "w"));
  EXPECT_FALSE(
      client.IsEcho(kube::kServices,
                    WithVersion(Secret("hook-tls"), (*again)["metadata"]["resourceVersion"]), "w"));
}

TEST(ObjectCopies, FailedWritesAndEventsLeaveNoRecord) {
  FakeClient inner;
  ObjectCopies client(inner);
  auto event = client.Create(kube::kEvents, "team-a",
                             {{"apiVersion", "v1"},
                              {"kind", "Event"},
                              {"metadata", {{"name", "hook.1"}, {"namespace", "team-a"}}}});
  ASSERT_TRUE(event.has_value());
  EXPECT_FALSE(client.IsEcho(kube::kEvents, *event, "w"));

  inner.Put(kube::kSecrets, Secret("taken"));
  auto refused = client.Create(kube::kSecrets, "team-a", Secret("taken"));  // 409
  ASSERT_FALSE(refused.has_value());
  EXPECT_FALSE(client.IsEcho(kube::kSecrets, WithVersion(Secret("taken"), "1"), "w"));
}

TEST(ObjectCopies, AKeptObjectIsReadWithoutARequestAndTheRestAreSentOn) {
  FakeClient inner;
  ObjectCopies client(inner);
  const Json stored = inner.Put(kube::kSecrets, Secret("hook-tls"));
  client.Keep(kube::kSecrets, stored, "w");
  inner.Remove(kube::kSecrets, "team-a", "hook-tls");  // the copy is what is read

  auto read = client.Get(kube::kSecrets, "team-a", "hook-tls");
  ASSERT_TRUE(read.has_value() && read->has_value());
  EXPECT_EQ(**read, stored);
  EXPECT_EQ(inner.ReadCount(), 0);

  auto other = client.Get(kube::kSecrets, "team-a", "other");
  ASSERT_TRUE(other.has_value());
  EXPECT_FALSE(other->has_value());
  EXPECT_EQ(inner.CountOf(Verb::kGet, kube::kSecrets, "other"), 1);

  client.Forget(kube::kSecrets, "team-a", "hook-tls");
  ASSERT_TRUE(client.Get(kube::kSecrets, "team-a", "hook-tls").has_value());
  EXPECT_EQ(inner.CountOf(Verb::kGet, kube::kSecrets, "hook-tls"), 1);
  EXPECT_EQ(client.size(), 0U);
}

TEST(ObjectCopies, AWriteIsTheNewCopyAndALateEventOfAnOlderVersionDoesNotUndoIt) {
  FakeClient inner;
  ObjectCopies client(inner);
  const Json before = inner.Put(kube::kSecrets, Secret("hook-tls"));
  client.Keep(kube::kSecrets, before, "w");
  Json changed = Secret("hook-tls");
  changed["data"]["ca.crt"] = "bmV3";
  ASSERT_TRUE(client.Update(kube::kSecrets, "team-a", "hook-tls", changed).has_value());

  client.Keep(kube::kSecrets, before, "w");  // the event of the version before the write
  auto read = client.Get(kube::kSecrets, "team-a", "hook-tls");
  ASSERT_TRUE(read.has_value() && read->has_value());
  EXPECT_EQ((**read)["data"]["ca.crt"], "bmV3");
  EXPECT_EQ(inner.ReadCount(), 0);
}

TEST(ObjectCopies, AWriteTheServerRefusesForgetsTheCopySoTheRetryReadsTheServer) {
  FakeClient inner;
  ObjectCopies client(inner);
  Json stale = inner.Put(kube::kSecrets, Secret("hook-tls"));
  client.Keep(kube::kSecrets, stale, "w");
  inner.Put(kube::kSecrets, Secret("hook-tls"));  // someone's change, not seen yet

  ASSERT_FALSE(client.Update(kube::kSecrets, "team-a", "hook-tls", stale).has_value());  // 409
  ASSERT_TRUE(client.Get(kube::kSecrets, "team-a", "hook-tls").has_value());
  EXPECT_EQ(inner.CountOf(Verb::kGet, kube::kSecrets, "hook-tls"), 1);
}

TEST(ObjectCopies, ARelistForgetsOnlyWhatThatWatchNoLongerLists) {
  FakeClient inner;
  ObjectCopies client(inner);
  client.Keep(kube::kSecrets, WithVersion(Secret("kept"), "1"), "labelled");
  client.Keep(kube::kSecrets, WithVersion(Secret("gone"), "2"), "labelled");
  client.Keep(kube::kSecrets, WithVersion(Secret("pinned"), "3"), "by name");

  client.ForgetUnlisted("labelled", [](std::string_view ns, std::string_view name) {
    return ns == "team-a" && name == "kept";
  });
  EXPECT_EQ(client.size(), 2U);
  ASSERT_TRUE(client.Get(kube::kSecrets, "team-a", "gone").has_value());
  ASSERT_TRUE(client.Get(kube::kSecrets, "team-a", "pinned").has_value());
  ASSERT_TRUE(client.Get(kube::kSecrets, "team-a", "kept").has_value());
  EXPECT_EQ(inner.ReadCount(), 1);  // only "gone" was asked for
}

}  // namespace
}  // namespace certctl::fleet
