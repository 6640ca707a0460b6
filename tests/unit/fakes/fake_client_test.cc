#include "fakes/fake_client.h"

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace certctl::testing {
namespace fake_client_test {
namespace {

using kube::Json;
using kube::kMutatingWebhookConfigurations;
using kube::kSecrets;
using kube::kValidatingWebhookConfigurations;
using kube::ListOptions;
using kube::PatchType;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

Json Secret(const std::string& ns, const std::string& name, Json data = Json::object(),
            Json labels = Json::object()) {
  return {{"metadata", {{"name", name}, {"namespace", ns}, {"labels", std::move(labels)}}},
          {"type", "kubernetes.io/tls"},
          {"data", std::move(data)}};
}

Json Webhook(const std::string& name, const std::string& bundle) {
  return {
      {"name", name},
      {"clientConfig", {{"service", {{"namespace", "ns"}, {"name", "svc"}}}, {"caBundle", bundle}}},
      {"sideEffects", "None"}};
}

Json Vwc(const std::string& name, std::vector<Json> webhooks, Json labels = Json::object()) {
  return {{"metadata", {{"name", name}, {"labels", std::move(labels)}}},
          {"webhooks", std::move(webhooks)}};
}

std::string Rv(const Json& object) {
  return object.value("/metadata/resourceVersion"_json_pointer, std::string());
}

std::vector<std::string> Names(const Json& list) {
  std::vector<std::string> names;
  for (const Json& item : list["items"]) {
    names.push_back(item["metadata"]["name"].get<std::string>());
  }
  return names;
}

Json MustGet(FakeClient& client, const kube::ResourceType& type, const std::string& ns,
             const std::string& name) {
  auto got = client.Get(type, ns, name);
  EXPECT_TRUE(got.has_value()) << got.error().message();
  EXPECT_TRUE(got.has_value() && got->has_value()) << name << " is absent";
  return got && *got ? **got : Json();
}

TEST(FakeClient, GetOfAbsentObjectIsAnEmptyOptional) {
  FakeClient client;
  auto got = client.Get(kSecrets, "ns", "nope");
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_FALSE(got->has_value());
}

TEST(FakeClient, PutSeedsStateWithoutCountingAsARequest) {
  FakeClient client;
  const Json stored = client.Put(kSecrets, Secret("ns", "cert", {{"tls.crt", "QQ=="}}));
  EXPECT_EQ(Rv(stored), "1");
  EXPECT_EQ(stored["kind"], "Secret");
  EXPECT_EQ(stored["apiVersion"], "v1");
  EXPECT_EQ(client.Object(kSecrets, "ns", "cert"), stored);
  EXPECT_THAT(client.Requests(), IsEmpty());
  EXPECT_EQ(client.WriteCount(), 0);

  EXPECT_EQ(MustGet(client, kSecrets, "ns", "cert"), stored);
  EXPECT_EQ(client.ReadCount(), 1);
}

TEST(FakeClient, PutWithoutNamespaceUsesDefault) {
  FakeClient client;
  Json secret = Secret("ns", "cert");
  secret["metadata"].erase("namespace");
  client.Put(kSecrets, secret);
  EXPECT_TRUE(client.Object(kSecrets, "default", "cert").has_value());
}

TEST(FakeClient, CreateStoresObjectUnderANewResourceVersion) {
  FakeClient client;
  client.Put(kSecrets, Secret("ns", "other"));
  auto created = client.Create(kSecrets, "ns", Secret("ns", "cert"));
  ASSERT_TRUE(created.has_value()) << created.error().message();
  EXPECT_EQ(Rv(*created), "2");
  EXPECT_EQ(client.resource_version(), 2u);
  EXPECT_EQ(client.Object(kSecrets, "ns", "cert"), *created);
}

TEST(FakeClient, CreateOfPresentObjectIsAlreadyExists) {
  FakeClient client;
  const Json original = client.Put(kSecrets, Secret("ns", "cert", {{"a", "QQ=="}}));
  auto created = client.Create(kSecrets, "ns", Secret("ns", "cert", {{"b", "Qg=="}}));
  ASSERT_FALSE(created.has_value());
  EXPECT_EQ(created.error().code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(created.error().message(), "secrets \"cert\" already exists");
  EXPECT_EQ(client.Object(kSecrets, "ns", "cert"), original);
}

TEST(FakeClient, CreateNamesGroupResourceOfNonCoreTypes) {
  FakeClient client;
  client.Put(kValidatingWebhookConfigurations, Vwc("hooks", {Webhook("a", "")}));
  auto created = client.Create(kValidatingWebhookConfigurations, "", Vwc("hooks", {}));
  ASSERT_FALSE(created.has_value());
  EXPECT_EQ(created.error().message(),
            "validatingwebhookconfigurations.admissionregistration.k8s.io \"hooks\" already "
            "exists");
}

TEST(FakeClient, CreateWithResourceVersionIsInvalid) {
  FakeClient client;
  Json secret = Secret("ns", "cert");
  secret["metadata"]["resourceVersion"] = "7";
  auto created = client.Create(kSecrets, "ns", secret);
  ASSERT_FALSE(created.has_value());
  EXPECT_EQ(created.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(client.Object(kSecrets, "ns", "cert").has_value());
}

TEST(FakeClient, UpdateThatChangesContentBumpsResourceVersion) {
  FakeClient client;
  Json secret = client.Put(kSecrets, Secret("ns", "cert", {{"tls.crt", "QQ=="}}));
  secret["data"]["tls.crt"] = "Qg==";
  auto updated =
      client.Update(kSecrets, "ns", secret["metadata"]["name"].get<std::string>(), secret);
  ASSERT_TRUE(updated.has_value()) << updated.error().message();
  EXPECT_EQ(Rv(*updated), "2");
  EXPECT_EQ((*updated)["data"]["tls.crt"], "Qg==");
  EXPECT_EQ(client.Object(kSecrets, "ns", "cert"), *updated);
}

TEST(FakeClient, NoOpUpdateKeepsResourceVersion) {
  FakeClient client;
  const Json secret = client.Put(kSecrets, Secret("ns", "cert", {{"tls.crt", "QQ=="}}));
  auto updated =
      client.Update(kSecrets, "ns", secret["metadata"]["name"].get<std::string>(), secret);
  ASSERT_TRUE(updated.has_value()) << updated.error().message();
  EXPECT_EQ(Rv(*updated), "1");
  EXPECT_EQ(client.resource_version(), 1u);
  EXPECT_EQ(client.WriteCount(), 1);  // the request was made, it just changed nothing
}

TEST(FakeClient, UpdateWithStaleResourceVersionIsConflict) {
  FakeClient client;
  Json stale = client.Put(kSecrets, Secret("ns", "x", {{"tls.crt", "QQ=="}}));
  Json fresh = stale;
  fresh["data"]["tls.crt"] = "Qg==";
  ASSERT_TRUE(client.Update(kSecrets, "ns", "x", fresh).has_value());

  stale["data"]["tls.crt"] = "Qw==";
  auto updated = client.Update(kSecrets, "ns", "x", stale);
  ASSERT_FALSE(updated.has_value());
  EXPECT_EQ(updated.error().code(), ErrorCode::kConflict);
  EXPECT_EQ(updated.error().message(),
            "Operation cannot be fulfilled on secrets \"x\": the object has been modified; please "
            "apply your changes to the latest version and try again");
  EXPECT_EQ(client.Object(kSecrets, "ns", "x")->at("data").at("tls.crt"), "Qg==");
}

TEST(FakeClient, UpdateWithoutResourceVersionIsUnconditional) {
  FakeClient client;
  client.Put(kSecrets, Secret("ns", "x", {{"tls.crt", "QQ=="}}));
  client.Put(kSecrets, Secret("ns", "x", {{"tls.crt", "Qg=="}}));
  auto updated = client.Update(kSecrets, "ns", "x", Secret("ns", "x", {{"tls.crt", "Qw=="}}));
  ASSERT_TRUE(updated.has_value()) << updated.error().message();
  EXPECT_EQ(Rv(*updated), "3");
}

TEST(FakeClient, UpdateOfAbsentObjectIsNotFound) {
  FakeClient client;
  auto updated = client.Update(kSecrets, "ns", "x", Secret("ns", "x"));
  ASSERT_FALSE(updated.has_value());
  EXPECT_EQ(updated.error().code(), ErrorCode::kNotFound);
  EXPECT_EQ(updated.error().message(), "secrets \"x\" not found");
}

TEST(FakeClient, MergePatchFollowsRfc7386) {
  FakeClient client;
  client.Put(kSecrets, Secret("ns", "x", {{"tls.crt", "QQ=="}, {"tls.key", "Qg=="}},
                              {{"app", "web"}, {"tier", "a"}}));
  auto patched = client.Patch(kSecrets, "ns", "x", PatchType::kMerge,
                              {{"metadata", {{"labels", {{"tier", nullptr}, {"new", "1"}}}}},
                               {"data", {{"ca.crt", "Qw=="}}}});
  ASSERT_TRUE(patched.has_value()) << patched.error().message();
  EXPECT_EQ((*patched)["metadata"]["labels"], (Json{{"app", "web"}, {"new", "1"}}));
  EXPECT_EQ((*patched)["data"],
            (Json{{"ca.crt", "Qw=="}, {"tls.crt", "QQ=="}, {"tls.key", "Qg=="}}));
  EXPECT_EQ(Rv(*patched), "2");
  EXPECT_EQ(client.Object(kSecrets, "ns", "x"), *patched);
}

TEST(FakeClient, MergePatchReplacesListsWhole) {
  FakeClient client;
  client.Put(kValidatingWebhookConfigurations,
             Vwc("hooks", {Webhook("a", "QQ=="), Webhook("b", "")}));
  auto patched = client.Patch(kValidatingWebhookConfigurations, "", "hooks", PatchType::kMerge,
                              {{"webhooks", Json::array({Json{{"name", "a"}}})}});
  ASSERT_TRUE(patched.has_value()) << patched.error().message();
  EXPECT_EQ((*patched)["webhooks"], (Json::array({{{"name", "a"}}})));
}

TEST(FakeClient, JsonPatchAppliesOperationsInOrder) {
  FakeClient client;
  client.Put(kValidatingWebhookConfigurations, Vwc("hooks", {Webhook("a", ""), Webhook("b", "")}));
  auto patched = client.Patch(
      kValidatingWebhookConfigurations, "", "hooks", PatchType::kJsonPatch,
      Json::array(
          {{{"op", "test"}, {"path", "/webhooks/1/name"}, {"value", "b"}},
           {{"op", "replace"}, {"path", "/webhooks/1/clientConfig/caBundle"}, {"value", "Qg=="}},
           {{"op", "add"}, {"path", "/metadata/labels/x"}, {"value", "y"}}}));
  ASSERT_TRUE(patched.has_value()) << patched.error().message();
  EXPECT_EQ((*patched)["webhooks"][0]["clientConfig"]["caBundle"], "");
  EXPECT_EQ((*patched)["webhooks"][1]["clientConfig"]["caBundle"], "Qg==");
  EXPECT_EQ((*patched)["metadata"]["labels"]["x"], "y");
  EXPECT_EQ(Rv(*patched), "2");
}

TEST(FakeClient, FailedJsonPatchTestIsInvalidArgumentAndChangesNothing) {
  FakeClient client;
  const Json original = client.Put(kValidatingWebhookConfigurations,
                                   Vwc("hooks", {Webhook("a", ""), Webhook("b", "")}));
  auto patched = client.Patch(
      kValidatingWebhookConfigurations, "", "hooks", PatchType::kJsonPatch,
      Json::array(
          {{{"op", "test"}, {"path", "/webhooks/1/name"}, {"value", "a"}},
           {{"op", "replace"}, {"path", "/webhooks/1/clientConfig/caBundle"}, {"value", "Qg=="}}}));
  ASSERT_FALSE(patched.has_value());
  EXPECT_EQ(patched.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(client.Object(kValidatingWebhookConfigurations, "", "hooks"), original);
  EXPECT_EQ(client.resource_version(), 1u);
}

TEST(FakeClient, JsonPatchOnMissingPathIsInvalidArgument) {
  FakeClient client;
  client.Put(kSecrets, Secret("ns", "x"));
  auto patched = client.Patch(kSecrets, "ns", "x", PatchType::kJsonPatch,
                              Json::array({{{"op", "remove"}, {"path", "/data/nope"}}}));
  ASSERT_FALSE(patched.has_value());
  EXPECT_EQ(patched.error().code(), ErrorCode::kInvalidArgument);
}

TEST(FakeClient, StrategicMergePatchUpdatesOnlyTheNamedWebhook) {
  FakeClient client;
  client.Put(kValidatingWebhookConfigurations,
             Vwc("hooks", {Webhook("a", "QQ=="), Webhook("b", "Qg=="), Webhook("c", "")}));
  auto patched = client.Patch(
      kValidatingWebhookConfigurations, "", "hooks", PatchType::kStrategicMerge,
      {{"webhooks", Json::array({Json{{"name", "a"}, {"clientConfig", {{"caBundle", "Qw=="}}}}})}});
  ASSERT_TRUE(patched.has_value()) << patched.error().message();
  const Json& webhooks = (*patched)["webhooks"];
  ASSERT_EQ(webhooks.size(), 3u);
  EXPECT_EQ(webhooks[0], Webhook("a", "Qw=="));  // service and sideEffects kept
  EXPECT_EQ(webhooks[1], Webhook("b", "Qg=="));
  EXPECT_EQ(webhooks[2], Webhook("c", ""));
  EXPECT_EQ(Rv(*patched), "2");
}

TEST(FakeClient, StrategicMergePatchAppendsNewEntriesAndHonoursDeleteDirective) {
  FakeClient client;
  client.Put(kMutatingWebhookConfigurations, Vwc("hooks", {Webhook("a", ""), Webhook("b", "")}));
  auto patched = client.Patch(
      kMutatingWebhookConfigurations, "", "hooks", PatchType::kStrategicMerge,
      {{"webhooks", Json::array({Json{{"name", "a"}, {"$patch", "delete"}},
                                 Json{{"name", "z"}, {"clientConfig", {{"caBundle", "QQ=="}}}}})}});
  ASSERT_TRUE(patched.has_value()) << patched.error().message();
  const Json& webhooks = (*patched)["webhooks"];
  ASSERT_EQ(webhooks.size(), 2u);
  EXPECT_EQ(webhooks[0]["name"], "b");
  EXPECT_EQ(webhooks[1], (Json{{"name", "z"}, {"clientConfig", {{"caBundle", "QQ=="}}}}));
}

TEST(FakeClient, StrategicMergePatchMergesMapsAndDeletesNulls) {
  FakeClient client;
  client.Put(kSecrets, Secret("ns", "x", {{"tls.crt", "QQ=="}, {"tls.key", "Qg=="}}));
  auto patched = client.Patch(kSecrets, "ns", "x", PatchType::kStrategicMerge,
                              {{"data", {{"tls.key", nullptr}, {"ca.crt", "Qw=="}}}});
  ASSERT_TRUE(patched.has_value()) << patched.error().message();
  EXPECT_EQ((*patched)["data"], (Json{{"ca.crt", "Qw=="}, {"tls.crt", "QQ=="}}));
}

TEST(FakeClient, StrategicMergeEntryWithoutMergeKeyIsInvalid) {
  FakeClient client;
  client.Put(kValidatingWebhookConfigurations, Vwc("hooks", {Webhook("a", "")}));
  auto patched =
      client.Patch(kValidatingWebhookConfigurations, "", "hooks", PatchType::kStrategicMerge,
                   {{"webhooks", Json::array({Json{{"clientConfig", {{"caBundle", "QQ=="}}}}})}});
  ASSERT_FALSE(patched.has_value());
  EXPECT_EQ(patched.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(patched.error().message(), HasSubstr("merge key: name"));
}

TEST(FakeClient, NoOpPatchKeepsResourceVersion) {
  FakeClient client;
  client.Put(kValidatingWebhookConfigurations,
             Vwc("hooks", {Webhook("a", "QQ=="), Webhook("b", "")}, {{"app", "web"}}));
  const std::vector<std::pair<PatchType, Json>> patches = {
      {PatchType::kMerge, {{"metadata", {{"labels", {{"app", "web"}}}}}}},
      {PatchType::kMerge, {{"webhooks", Json::array({Webhook("a", "QQ=="), Webhook("b", "")})}}},
      {PatchType::kStrategicMerge,
       {{"webhooks",
         Json::array({Json{{"name", "a"}, {"clientConfig", {{"caBundle", "QQ=="}}}}})}}},
      {PatchType::kJsonPatch, Json::array({{{"op", "replace"},
                                            {"path", "/webhooks/0/clientConfig/caBundle"},
                                            {"value", "QQ=="}}})},
  };
  for (const auto& [type, patch] : patches) {
    auto patched = client.Patch(kValidatingWebhookConfigurations, "", "hooks", type, patch);
    ASSERT_TRUE(patched.has_value()) << patched.error().message();
    EXPECT_EQ(Rv(*patched), "1") << patch.dump();
  }
  EXPECT_EQ(client.resource_version(), 1u);
  EXPECT_EQ(client.WriteCount(), 4);
}

TEST(FakeClient, PatchCarryingStaleResourceVersionIsConflict) {
  FakeClient client;
  client.Put(kSecrets, Secret("ns", "x"));
  client.Put(kSecrets, Secret("ns", "x", {{"a", "QQ=="}}));
  auto patched =
      client.Patch(kSecrets, "ns", "x", PatchType::kMerge,
                   {{"metadata", {{"resourceVersion", "1"}}}, {"data", {{"a", "Qg=="}}}});
  ASSERT_FALSE(patched.has_value());
  EXPECT_EQ(patched.error().code(), ErrorCode::kConflict);
  EXPECT_EQ(client.Object(kSecrets, "ns", "x")->at("data").at("a"), "QQ==");

  auto current =
      client.Patch(kSecrets, "ns", "x", PatchType::kMerge,
                   {{"metadata", {{"resourceVersion", "2"}}}, {"data", {{"a", "Qg=="}}}});
  ASSERT_TRUE(current.has_value()) << current.error().message();
  EXPECT_EQ(Rv(*current), "3");
}

TEST(FakeClient, PatchOfAbsentObjectIsNotFound) {
  FakeClient client;
  auto patched = client.Patch(kValidatingWebhookConfigurations, "", "hooks", PatchType::kMerge,
                              {{"webhooks", Json::array()}});
  ASSERT_FALSE(patched.has_value());
  EXPECT_EQ(patched.error().code(), ErrorCode::kNotFound);
  EXPECT_FALSE(client.Object(kValidatingWebhookConfigurations, "", "hooks").has_value());
}

TEST(FakeClient, PatchCannotRenameTheObject) {
  FakeClient client;
  client.Put(kSecrets, Secret("ns", "x"));
  auto patched =
      client.Patch(kSecrets, "ns", "x", PatchType::kMerge, {{"metadata", {{"name", "y"}}}});
  ASSERT_FALSE(patched.has_value());
  EXPECT_EQ(patched.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(client.Object(kSecrets, "ns", "x").has_value());
  EXPECT_FALSE(client.Object(kSecrets, "ns", "y").has_value());
}

TEST(FakeClient, DeleteRemovesTheObjectAndBumpsTheCounter) {
  FakeClient client;
  client.Put(kSecrets, Secret("ns", "x"));
  ASSERT_TRUE(client.Delete(kSecrets, "ns", "x").has_value());
  EXPECT_FALSE(client.Object(kSecrets, "ns", "x").has_value());
  EXPECT_EQ(client.resource_version(), 2u);

  auto again = client.Delete(kSecrets, "ns", "x");
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code(), ErrorCode::kNotFound);
}

TEST(FakeClient, NamespacesKeepNamespacedObjectsApart) {
  FakeClient client;
  client.Put(kSecrets, Secret("a", "x", {{"k", "QQ=="}}));
  client.Put(kSecrets, Secret("b", "x", {{"k", "Qg=="}}));
  EXPECT_EQ(MustGet(client, kSecrets, "a", "x")["data"]["k"], "QQ==");
  EXPECT_EQ(MustGet(client, kSecrets, "b", "x")["data"]["k"], "Qg==");
  auto absent = client.Get(kSecrets, "c", "x");
  ASSERT_TRUE(absent.has_value());
  EXPECT_FALSE(absent->has_value());
}

TEST(FakeClient, NamespacedCallWithoutNamespaceIsInvalid) {
  FakeClient client;
  client.Put(kSecrets, Secret("default", "x"));
  auto got = client.Get(kSecrets, "", "x");
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), ErrorCode::kInvalidArgument);
}

TEST(FakeClient, ClusterScopedTypesIgnoreTheNamespace) {
  FakeClient client;
  Json hooks = Vwc("hooks", {Webhook("a", "")});
  hooks["metadata"]["namespace"] = "ignored";
  const Json stored = client.Put(kValidatingWebhookConfigurations, hooks);
  EXPECT_FALSE(stored["metadata"].contains("namespace"));
  EXPECT_EQ(MustGet(client, kValidatingWebhookConfigurations, "whatever", "hooks"), stored);
  EXPECT_EQ(client.Object(kValidatingWebhookConfigurations, "", "hooks"), stored);
  EXPECT_EQ(client.Requests()[0].ns, "");
}

TEST(FakeClient, ListReturnsItemsWithoutTypeMetaAndTheCurrentResourceVersion) {
  FakeClient client;
  client.Put(kSecrets, Secret("a", "x"));
  client.Put(kSecrets, Secret("b", "y"));
  client.Put(kValidatingWebhookConfigurations, Vwc("hooks", {Webhook("a", "")}));
  auto list = client.List(kSecrets, "", {});
  ASSERT_TRUE(list.has_value()) << list.error().message();
  EXPECT_EQ((*list)["kind"], "SecretList");
  EXPECT_EQ((*list)["metadata"]["resourceVersion"], "3");
  EXPECT_THAT(Names(*list), ElementsAre("x", "y"));
  EXPECT_FALSE((*list)["items"][0].contains("kind"));

  auto in_a = client.List(kSecrets, "a", {});
  ASSERT_TRUE(in_a.has_value()) << in_a.error().message();
  EXPECT_THAT(Names(*in_a), ElementsAre("x"));
}

TEST(FakeClient, ListFiltersByEqualityLabelSelectors) {
  FakeClient client;
  client.Put(kValidatingWebhookConfigurations,
             Vwc("web", {Webhook("a", "")}, {{"app", "web"}, {"tier", "front"}}));
  client.Put(kValidatingWebhookConfigurations,
             Vwc("api", {Webhook("a", "")}, {{"app", "api"}, {"tier", "back"}}));
  client.Put(kValidatingWebhookConfigurations, Vwc("bare", {Webhook("a", "")}));

  auto names = [&](const std::string& selector) {
    ListOptions options;
    options.label_selector = selector;
    auto list = client.List(kValidatingWebhookConfigurations, "", options);
    EXPECT_TRUE(list.has_value()) << selector << ": " << list.error().message();
    return list ? Names(*list) : std::vector<std::string>{"<error>"};
  };
  EXPECT_THAT(names(""), ElementsAre("api", "bare", "web"));
  EXPECT_THAT(names("app=web"), ElementsAre("web"));
  EXPECT_THAT(names("app==web"), ElementsAre("web"));
  EXPECT_THAT(names("app!=web"), ElementsAre("api", "bare"));
  EXPECT_THAT(names("app"), ElementsAre("api", "web"));
  EXPECT_THAT(names("!app"), ElementsAre("bare"));
  EXPECT_THAT(names("app, tier=back"), ElementsAre("api"));
  EXPECT_THAT(names("app=web,tier=back"), IsEmpty());
  EXPECT_THAT(names("app=nope"), IsEmpty());
}

TEST(FakeClient, ListRejectsSetBasedLabelSelectors) {
  FakeClient client;
  ListOptions options;
  options.label_selector = "app in (web,api)";
  auto list = client.List(kValidatingWebhookConfigurations, "", options);
  ASSERT_FALSE(list.has_value());
  EXPECT_EQ(list.error().code(), ErrorCode::kInvalidArgument);
}

TEST(FakeClient, ListFiltersByNameFieldSelector) {
  FakeClient client;
  client.Put(kSecrets, Secret("ns", "x"));
  client.Put(kSecrets, Secret("ns", "y"));
  ListOptions options;
  options.field_selector = "metadata.name=y";
  auto list = client.List(kSecrets, "ns", options);
  ASSERT_TRUE(list.has_value()) << list.error().message();
  EXPECT_THAT(Names(*list), ElementsAre("y"));

  options.field_selector = "metadata.name!=y";
  list = client.List(kSecrets, "ns", options);
  ASSERT_TRUE(list.has_value()) << list.error().message();
  EXPECT_THAT(Names(*list), ElementsAre("x"));

  options.field_selector = "spec.nodeName=n";
  list = client.List(kSecrets, "ns", options);
  ASSERT_FALSE(list.has_value());
  EXPECT_EQ(list.error().code(), ErrorCode::kInvalidArgument);
}

TEST(FakeClient, InjectedFailuresHitOnlyTheNextMatchingCalls) {
  FakeClient client;
  client.Put(kSecrets, Secret("ns", "x"));
  client.InjectFailure(
      Verb::kGet, kSecrets,
      Error(ErrorCode::kUnavailable, "too many requests").set_retry_after(std::chrono::seconds(3)),
      2);

  // Other verbs and other resources are not affected.
  EXPECT_TRUE(client.List(kSecrets, "ns", {}).has_value());
  EXPECT_TRUE(client.Get(kValidatingWebhookConfigurations, "", "x").has_value());

  for (int i = 0; i < 2; ++i) {
    auto got = client.Get(kSecrets, "ns", "x");
    ASSERT_FALSE(got.has_value());
    EXPECT_EQ(got.error().code(), ErrorCode::kUnavailable);
    EXPECT_EQ(got.error().message(), "too many requests");
    EXPECT_EQ(got.error().retry_after(), std::chrono::seconds(3));
  }
  auto got = client.Get(kSecrets, "ns", "x");
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_TRUE(got->has_value());
}

TEST(FakeClient, InjectedFailuresAreUsedUpInOrder) {
  FakeClient client;
  Json secret = client.Put(kSecrets, Secret("ns", "x"));
  secret["data"]["a"] = "QQ==";
  client.InjectFailure(Verb::kUpdate, kSecrets, Error(ErrorCode::kConflict, "first"));
  client.InjectFailure(Verb::kUpdate, kSecrets, Error(ErrorCode::kPermissionDenied, "second"));

  auto first = client.Update(kSecrets, "ns", secret["metadata"]["name"].get<std::string>(), secret);
  ASSERT_FALSE(first.has_value());
  EXPECT_EQ(first.error().code(), ErrorCode::kConflict);
  auto second =
      client.Update(kSecrets, "ns", secret["metadata"]["name"].get<std::string>(), secret);
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().code(), ErrorCode::kPermissionDenied);
  // Failed calls change nothing.
  EXPECT_EQ(Rv(*client.Object(kSecrets, "ns", "x")), "1");

  auto third = client.Update(kSecrets, "ns", secret["metadata"]["name"].get<std::string>(), secret);
  ASSERT_TRUE(third.has_value()) << third.error().message();
  EXPECT_EQ(Rv(*third), "2");
}

TEST(FakeClient, CountsEveryReadAndWriteIncludingFailedOnes) {
  FakeClient client;
  client.Put(kSecrets, Secret("ns", "x"));
  client.InjectFailure(Verb::kPatch, kSecrets, Error(ErrorCode::kUnavailable, "down"));

  EXPECT_TRUE(client.Get(kSecrets, "ns", "x").has_value());
  EXPECT_TRUE(client.Get(kSecrets, "ns", "y").has_value());
  EXPECT_TRUE(client.List(kValidatingWebhookConfigurations, "", {}).has_value());
  EXPECT_FALSE(client.Patch(kSecrets, "ns", "x", PatchType::kMerge, Json::object()).has_value());
  EXPECT_TRUE(client.Patch(kSecrets, "ns", "x", PatchType::kMerge, Json::object()).has_value());
  EXPECT_FALSE(client.Create(kSecrets, "ns", Secret("ns", "x")).has_value());
  EXPECT_TRUE(client.Delete(kSecrets, "ns", "x").has_value());

  EXPECT_EQ(client.ReadCount(), 3);
  EXPECT_EQ(client.WriteCount(), 4);
  EXPECT_EQ(client.CountOf(Verb::kGet, kSecrets), 2);
  EXPECT_EQ(client.CountOf(Verb::kGet, kSecrets, "x"), 1);
  EXPECT_EQ(client.CountOf(Verb::kPatch, kSecrets, "x"), 2);
  const std::vector<FakeRequest> requests = client.Requests();
  ASSERT_EQ(requests.size(), 7u);
  EXPECT_EQ(requests[0].verb, Verb::kGet);
  EXPECT_EQ(requests[0].resource, "secrets");
  EXPECT_EQ(requests[0].ns, "ns");
  EXPECT_EQ(requests[0].name, "x");
  EXPECT_EQ(requests[2].resource, "validatingwebhookconfigurations");
  EXPECT_EQ(requests[2].name, "");

  client.ClearRequests();
  EXPECT_EQ(client.ReadCount(), 0);
  EXPECT_EQ(client.WriteCount(), 0);
}

TEST(FakeClient, WatchIsNotSupportedYet) {
  FakeClient client;
  auto watched = client.Watch(
      kSecrets, "ns", {}, [](const kube::WatchEvent&) { return true; }, [] { return false; });
  ASSERT_FALSE(watched.has_value());
  EXPECT_EQ(watched.error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(client.ReadCount(), 0);
  EXPECT_EQ(client.CountOf(Verb::kWatch, kSecrets), 1);
}

// Optimistic concurrency under real threads: every increment lands exactly once because
// stale writers get a conflict and re-read.
TEST(FakeClient, ConcurrentReadModifyWriteLosesNoUpdate) {
  FakeClient client;
  client.Put(kSecrets, Secret("ns", "counter", {{"n", "0"}}));
  constexpr int kThreads = 4;
  constexpr int kIncrements = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&client] {
      for (int i = 0; i < kIncrements; ++i) {
        while (true) {
          auto got = client.Get(kSecrets, "ns", "counter");
          ASSERT_TRUE(got && *got);
          Json secret = **got;
          secret["data"]["n"] =
              std::to_string(std::stoi(secret["data"]["n"].get<std::string>()) + 1);
          auto updated =
              client.Update(kSecrets, "ns", secret["metadata"]["name"].get<std::string>(), secret);
          if (updated) {
            break;
          }
          ASSERT_EQ(updated.error().code(), ErrorCode::kConflict);
        }
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(client.Object(kSecrets, "ns", "counter")->at("data").at("n"),
            std::to_string(kThreads * kIncrements));
  EXPECT_EQ(client.resource_version(), 1u + kThreads * kIncrements);
}

}  // namespace
}  // namespace fake_client_test
}  // namespace certctl::testing
