#include "certctl/controller/inject.h"

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/util/base64.h"

#include "fakes/fake_client.h"
#include "fakes/fake_clock.h"
#include "support/target_objects.h"

namespace certctl::controller {
namespace inject_test {
namespace {

using Json = nlohmann::json;
using certctl::testing::ConversionCrd;
using certctl::testing::FakeClient;
using certctl::testing::FakeClock;
using certctl::testing::Verb;
using certctl::testing::WebhookEntry;
using kube::kApiServices;
using kube::kCustomResourceDefinitions;
using kube::kMutatingWebhookConfigurations;
using kube::kValidatingWebhookConfigurations;
using ::testing::AllOf;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

constexpr char kNs[] = "webhooks";
// InjectBundle treats the bundle as opaque text: PEM-shaped strings are enough here.
constexpr char kBundle[] = "-----BEGIN CERTIFICATE-----\nTkVX\n-----END CERTIFICATE-----\n";
constexpr char kOldBundle[] = "-----BEGIN CERTIFICATE-----\nT0xE\n-----END CERTIFICATE-----\n";

constexpr char kVwc[] = "policy";
constexpr char kMwc[] = "defaults";
constexpr char kCrd[] = "widgets.example.com";
constexpr char kApi[] = "v1beta1.metrics.example.com";

// A clock like FakeClock whose Sleep also lets the world move on: `on_sleep` runs after
// each sleep with the number of sleeps so far.
class ScriptedClock final : public Clock {
 public:
  explicit ScriptedClock(std::function<void(int)> on_sleep) : on_sleep_(std::move(on_sleep)) {}

  TimePoint Now() const override { return now_; }
  MonotonicTime Monotonic() const override { return MonotonicTime(now_.time_since_epoch()); }
  void Sleep(std::chrono::milliseconds duration) const override {
    now_ += duration;
    on_sleep_(++sleeps_);
  }

 private:
  std::function<void(int)> on_sleep_;
  mutable TimePoint now_{std::chrono::seconds(1800000000)};
  mutable int sleeps_ = 0;
};

// A kube::Client over a FakeClient that lets another writer act once, just before the first
// Patch reaches the server: the way a test changes an object between our read and our write.
class InterposingClient final : public kube::Client {
 public:
  InterposingClient(FakeClient& fake, std::function<void(FakeClient&)> other_writer)
      : fake_(fake), other_writer_(std::move(other_writer)) {}

  Result<std::optional<Json>> Get(const kube::ResourceType& type, std::string_view ns,
                                  std::string_view name) override {
    return fake_.Get(type, ns, name);
  }
  Result<Json> List(const kube::ResourceType& type, std::string_view ns,
                    const kube::ListOptions& options) override {
    return fake_.List(type, ns, options);
  }
  Result<Json> Create(const kube::ResourceType& type, std::string_view ns,
                      const Json& object) override {
    return fake_.Create(type, ns, object);
  }
  Result<Json> Update(const kube::ResourceType& type, std::string_view ns, std::string_view name,
                      const Json& object) override {
    return fake_.Update(type, ns, name, object);
  }
  Result<Json> Patch(const kube::ResourceType& type, std::string_view ns, std::string_view name,
                     kube::PatchType patch_type, const Json& patch) override {
    if (!acted_) {
      acted_ = true;
      other_writer_(fake_);
    }
    return fake_.Patch(type, ns, name, patch_type, patch);
  }
  Status Delete(const kube::ResourceType& type, std::string_view ns,
                std::string_view name) override {
    return fake_.Delete(type, ns, name);
  }
  Status Watch(const kube::ResourceType& type, std::string_view ns,
               const kube::WatchOptions& options,
               const std::function<bool(const kube::WatchEvent&)>& on_event,
               const std::function<bool()>& cancelled) override {
    return fake_.Watch(type, ns, options, on_event, cancelled);
  }

 private:
  FakeClient& fake_;
  std::function<void(FakeClient&)> other_writer_;
  bool acted_ = false;
};

Json Webhook(const std::string& name, const std::string& bundle_pem) {
  return WebhookEntry(name, kNs).Bundle(bundle_pem);
}

// With an annotation, so a test can see that nothing but the caBundle changed.
Json WebhookConfiguration(const std::string& name, std::vector<Json> webhooks,
                          Json labels = Json::object()) {
  Json object =
      certctl::testing::WebhookConfiguration(name, std::move(webhooks), std::move(labels));
  object["metadata"]["annotations"] = {{"owner", "team"}};
  return object;
}

Json Crd(const std::string& bundle_pem) {
  return ConversionCrd(kCrd, {{"service", {{"namespace", kNs}, {"name", "svc"}}},
                              {"caBundle", Base64Encode(bundle_pem)}});
}

Json ApiService(const std::string& bundle_pem) {
  return certctl::testing::ApiService(kApi, {{"namespace", kNs}, {"name", "svc"}}, bundle_pem);
}

TargetSelection AllFour() {
  TargetSelection selection;
  selection.validating_webhooks = {kVwc};
  selection.mutating_webhooks = {kMwc};
  selection.crds = {kCrd};
  selection.api_services = {kApi};
  return selection;
}

InjectOptions Options(std::chrono::seconds wait = std::chrono::seconds(120)) {
  InjectOptions options;
  options.wait_for_targets = wait;
  options.poll_interval = std::chrono::milliseconds(1000);
  return options;
}

// Decoded caBundle values of an object, in document order.
std::vector<std::string> Bundles(const Json& object) {
  std::vector<std::string> bundles;
  auto decode = [&bundles](const Json& holder) {
    const std::string text = holder.value("caBundle", std::string());
    auto decoded = Base64Decode(text);
    EXPECT_TRUE(decoded.has_value()) << decoded.error().message();
    bundles.push_back(decoded.value_or("<bad base64>"));
  };
  if (object.contains("webhooks")) {
    for (const Json& webhook : object["webhooks"]) {
      decode(webhook["clientConfig"]);
    }
  } else if (object.contains("/spec/conversion"_json_pointer)) {
    decode(object["spec"]["conversion"]["webhook"]["clientConfig"]);
  } else {
    decode(object["spec"]);
  }
  return bundles;
}

// Where `before` and `after` differ, resourceVersion aside, by an independent diff.
std::vector<std::string> ChangedPaths(const Json& before, const Json& after) {
  Json a = before;
  Json b = after;
  a["metadata"].erase("resourceVersion");
  b["metadata"].erase("resourceVersion");
  std::vector<std::string> paths;
  for (const Json& operation : Json::diff(a, b)) {
    paths.push_back(operation["path"].get<std::string>());
  }
  return paths;
}

// A cluster holding the four targets with empty caBundles (a VWC with three webhooks, one
// blank and two absent, an MWC with two, a CRD with an old bundle, an APIService without).
struct Cluster {
  Cluster() {
    client.Put(
        kValidatingWebhookConfigurations,
        WebhookConfiguration(kVwc, {Webhook("a.example.com", ""), Webhook("b.example.com", ""),
                                    Webhook("c.example.com", "")}));
    client.Put(kMutatingWebhookConfigurations,
               WebhookConfiguration(
                   kMwc, {Webhook("x.example.com", ""), Webhook("y.example.com", kOldBundle)}));
    client.Put(kCustomResourceDefinitions, Crd(kOldBundle));
    client.Put(kApiServices, ApiService(""));
  }

  Json Vwc() const { return Object(kValidatingWebhookConfigurations, kVwc); }
  Json Mwc() const { return Object(kMutatingWebhookConfigurations, kMwc); }
  Json CrdObject() const { return Object(kCustomResourceDefinitions, kCrd); }
  Json Api() const { return Object(kApiServices, kApi); }
  std::vector<Json> All() const { return {Vwc(), Mwc(), CrdObject(), Api()}; }

  Json Object(const kube::ResourceType& type, const std::string& name) const {
    auto object = client.Object(type, "", name);
    EXPECT_TRUE(object.has_value()) << name << " is absent";
    return object.value_or(Json::object());
  }

  FakeClock clock;
  FakeClient client;
};

TEST(InjectBundle, FillsEverySlotWithOnePatchPerObject) {
  Cluster cluster;
  const std::vector<Json> before = cluster.All();
  auto outcome = InjectBundle(cluster.client, AllFour(), kBundle, Options(), cluster.clock);
  ASSERT_TRUE(outcome.has_value()) << outcome.error().message();
  EXPECT_EQ(outcome->objects, 4);
  EXPECT_EQ(outcome->slots, 7);
  EXPECT_EQ(outcome->patched_objects, 4);
  EXPECT_EQ(outcome->patched_slots, 7);
  EXPECT_THAT(outcome->patched, UnorderedElementsAre("validatingwebhookconfiguration/policy",
                                                     "mutatingwebhookconfiguration/defaults",
                                                     "customresourcedefinition/widgets.example.com",
                                                     "apiservice/v1beta1.metrics.example.com"));

  EXPECT_THAT(Bundles(cluster.Vwc()), ElementsAre(kBundle, kBundle, kBundle));
  EXPECT_THAT(Bundles(cluster.Mwc()), ElementsAre(kBundle, kBundle));
  EXPECT_THAT(Bundles(cluster.CrdObject()), ElementsAre(kBundle));
  EXPECT_THAT(Bundles(cluster.Api()), ElementsAre(kBundle));

  // No other field changed.
  const std::vector<Json> after = cluster.All();
  for (std::size_t i = 0; i < before.size(); ++i) {
    for (const std::string& path : ChangedPaths(before[i], after[i])) {
      EXPECT_THAT(path, ::testing::EndsWith("/caBundle")) << before[i]["metadata"]["name"];
    }
  }
  EXPECT_EQ(cluster.client.WriteCount(), 4);
  EXPECT_EQ(cluster.client.CountOf(Verb::kPatch, kValidatingWebhookConfigurations, kVwc), 1);
  EXPECT_EQ(cluster.client.CountOf(Verb::kPatch, kMutatingWebhookConfigurations, kMwc), 1);
  EXPECT_EQ(cluster.client.CountOf(Verb::kPatch, kCustomResourceDefinitions, kCrd), 1);
  EXPECT_EQ(cluster.client.CountOf(Verb::kPatch, kApiServices, kApi), 1);
  EXPECT_THAT(cluster.clock.sleeps(), IsEmpty());
}

TEST(InjectBundle, SecondRunWritesNothing) {
  Cluster cluster;
  ASSERT_TRUE(InjectBundle(cluster.client, AllFour(), kBundle, Options(), cluster.clock));
  const std::uint64_t version = cluster.client.resource_version();
  cluster.client.ClearRequests();

  auto outcome = InjectBundle(cluster.client, AllFour(), kBundle, Options(), cluster.clock);
  ASSERT_TRUE(outcome.has_value()) << outcome.error().message();
  EXPECT_EQ(outcome->objects, 4);
  EXPECT_EQ(outcome->slots, 7);
  EXPECT_EQ(outcome->patched_objects, 0);
  EXPECT_EQ(outcome->patched_slots, 0);
  EXPECT_THAT(outcome->patched, IsEmpty());
  EXPECT_EQ(cluster.client.WriteCount(), 0);
  EXPECT_EQ(cluster.client.resource_version(), version);
}

TEST(InjectBundle, OneWipedWebhookPatchesOnlyThatSlot) {
  Cluster cluster;
  ASSERT_TRUE(InjectBundle(cluster.client, AllFour(), kBundle, Options(), cluster.clock));
  Json wiped = cluster.Vwc();
  wiped["webhooks"][1]["clientConfig"].erase("caBundle");  // a `helm upgrade` re-applied it
  cluster.client.Put(kValidatingWebhookConfigurations, wiped);
  const Json vwc_before = cluster.Vwc();
  const std::vector<Json> before = cluster.All();
  cluster.client.ClearRequests();

  auto outcome = InjectBundle(cluster.client, AllFour(), kBundle, Options(), cluster.clock);
  ASSERT_TRUE(outcome.has_value()) << outcome.error().message();
  EXPECT_EQ(outcome->patched_objects, 1);
  EXPECT_EQ(outcome->patched_slots, 1);
  EXPECT_THAT(outcome->patched, ElementsAre("validatingwebhookconfiguration/policy"));
  EXPECT_EQ(cluster.client.WriteCount(), 1);

  const std::vector<Json> after = cluster.All();
  EXPECT_THAT(ChangedPaths(vwc_before, after[0]), ElementsAre("/webhooks/1/clientConfig/caBundle"));
  EXPECT_THAT(Bundles(after[0]), ElementsAre(kBundle, kBundle, kBundle));
  for (std::size_t i = 1; i < before.size(); ++i) {
    EXPECT_EQ(after[i], before[i]);  // resourceVersion included
  }
}

TEST(InjectBundle, WaitsForATargetThatAppearsLater) {
  Cluster cluster;
  cluster.client.Remove(kMutatingWebhookConfigurations, "", kMwc);
  // The chart's post-install step creates the MWC five polls after we started looking.
  ScriptedClock clock([&cluster](int sleeps) {
    if (sleeps == 5) {
      cluster.client.Put(kMutatingWebhookConfigurations,
                         WebhookConfiguration(kMwc, {Webhook("x.example.com", "")}));
    }
  });
  const TimePoint start = clock.Now();

  auto outcome = InjectBundle(cluster.client, AllFour(), kBundle, Options(), clock);
  ASSERT_TRUE(outcome.has_value()) << outcome.error().message();
  EXPECT_EQ(outcome->objects, 4);
  EXPECT_EQ(outcome->patched_objects, 4);
  EXPECT_THAT(Bundles(cluster.Mwc()), ElementsAre(kBundle));
  EXPECT_EQ(clock.Now() - start, std::chrono::seconds(5));
}

TEST(InjectBundle, TargetStillMissingAfterTheWaitIsNotFoundAndNothingIsWritten) {
  Cluster cluster;
  cluster.client.Remove(kMutatingWebhookConfigurations, "", kMwc);
  const std::vector<Json> before = {cluster.Vwc(), cluster.CrdObject(), cluster.Api()};
  const TimePoint start = cluster.clock.Now();

  auto outcome = InjectBundle(cluster.client, AllFour(), kBundle, Options(std::chrono::seconds(30)),
                              cluster.clock);
  ASSERT_FALSE(outcome.has_value());
  EXPECT_EQ(outcome.error().code(), ErrorCode::kNotFound);
  EXPECT_THAT(outcome.error().message(),
              AllOf(HasSubstr("mutatingwebhookconfiguration/defaults"), HasSubstr("30s")));
  EXPECT_THAT(outcome.error().message(), ::testing::Not(HasSubstr("policy")));
  // It waited the whole time, polling, and then failed before writing anything.
  EXPECT_GE(cluster.clock.Now() - start, std::chrono::seconds(30));
  EXPECT_LE(cluster.clock.Now() - start, std::chrono::seconds(31));
  EXPECT_EQ(cluster.client.WriteCount(), 0);
  EXPECT_EQ(std::vector<Json>({cluster.Vwc(), cluster.CrdObject(), cluster.Api()}), before);
}

// A hook Job waiting for a target says so at once and every 10 s, not only at its deadline.
TEST(InjectBundle, AWaitForMissingTargetsIsToldAtOnceAndThenEvery10Seconds) {
  Cluster cluster;
  cluster.client.Remove(kMutatingWebhookConfigurations, "", kMwc);
  InjectOptions options = Options(std::chrono::seconds(25));
  std::vector<std::string> lines;
  options.on_waiting = [&lines](const std::string& line) { lines.push_back(line); };
  auto outcome = InjectBundle(cluster.client, AllFour(), kBundle, options, cluster.clock);
  ASSERT_FALSE(outcome.has_value());
  ASSERT_EQ(lines.size(), 3u);  // at 0 s, 10 s and 20 s of the 25
  EXPECT_EQ(lines[0],
            "waiting for mutatingwebhookconfiguration/defaults to appear (0s so far, at most 25s)");
  EXPECT_THAT(lines[1], HasSubstr("(10s so far, at most 25s)"));
  EXPECT_THAT(lines[2], HasSubstr("(20s so far, at most 25s)"));

  // Nothing to wait for: nothing told.
  lines.clear();
  cluster.client.Put(kMutatingWebhookConfigurations,
                     WebhookConfiguration(kMwc, {Webhook("x.example.com", "")}));
  ASSERT_TRUE(InjectBundle(cluster.client, AllFour(), kBundle, options, cluster.clock));
  EXPECT_TRUE(lines.empty());
}

TEST(InjectBundle, EveryMissingTargetIsNamed) {
  FakeClient client;
  FakeClock clock;
  auto outcome = InjectBundle(client, AllFour(), kBundle, Options(std::chrono::seconds(0)), clock);
  ASSERT_FALSE(outcome.has_value());
  EXPECT_EQ(outcome.error().code(), ErrorCode::kNotFound);
  EXPECT_THAT(outcome.error().message(),
              AllOf(HasSubstr("validatingwebhookconfiguration/policy"),
                    HasSubstr("mutatingwebhookconfiguration/defaults"),
                    HasSubstr("customresourcedefinition/widgets.example.com"),
                    HasSubstr("apiservice/v1beta1.metrics.example.com")));
  EXPECT_THAT(clock.sleeps(), IsEmpty());
}

TEST(InjectBundle, LeavingOutMissingTargetsInjectsTheOthersAtOnceAndNamesTheRest) {
  Cluster cluster;
  cluster.client.Remove(kMutatingWebhookConfigurations, "", kMwc);
  InjectOptions options = Options(std::chrono::seconds(30));
  options.leave_out_missing = true;
  auto outcome = InjectBundle(cluster.client, AllFour(), kBundle, options, cluster.clock);
  ASSERT_TRUE(outcome.has_value()) << outcome.error().message();
  EXPECT_THAT(outcome->missing, ElementsAre("mutatingwebhookconfiguration/defaults"));
  EXPECT_EQ(outcome->objects, 3);
  EXPECT_EQ(outcome->patched_objects, 3);
  EXPECT_THAT(Bundles(cluster.Vwc()), Each(kBundle));
  EXPECT_THAT(cluster.clock.sleeps(), IsEmpty());
}

TEST(InjectBundle, SelectorWithoutMatchFailsAfterTheWait) {
  Cluster cluster;
  TargetSelection selection;
  selection.webhook_selector = "app=nobody";
  const TimePoint start = cluster.clock.Now();
  auto outcome = InjectBundle(cluster.client, selection, kBundle, Options(std::chrono::seconds(10)),
                              cluster.clock);
  ASSERT_FALSE(outcome.has_value());
  EXPECT_EQ(outcome.error().code(), ErrorCode::kNotFound);
  EXPECT_THAT(outcome.error().message(), HasSubstr("app=nobody"));
  EXPECT_GE(cluster.clock.Now() - start, std::chrono::seconds(10));
  EXPECT_EQ(cluster.client.WriteCount(), 0);
}

TEST(InjectBundle, SelectorMatchesBothKinds) {
  FakeClock clock;
  FakeClient client;
  const Json labels = {{"app", "policy"}};
  client.Put(kValidatingWebhookConfigurations,
             WebhookConfiguration("v1", {Webhook("a.example.com", "")}, labels));
  client.Put(
      kMutatingWebhookConfigurations,
      WebhookConfiguration(
          "m1", {Webhook("b.example.com", kOldBundle), Webhook("c.example.com", "")}, labels));
  const Json unrelated =
      client.Put(kValidatingWebhookConfigurations,
                 WebhookConfiguration("other", {Webhook("z.example.com", "")}, {{"app", "x"}}));
  TargetSelection selection;
  selection.webhook_selector = "app=policy";

  auto outcome = InjectBundle(client, selection, kBundle, Options(), clock);
  ASSERT_TRUE(outcome.has_value()) << outcome.error().message();
  EXPECT_EQ(outcome->objects, 2);
  EXPECT_EQ(outcome->slots, 3);
  EXPECT_EQ(outcome->patched_slots, 3);
  EXPECT_THAT(outcome->patched, UnorderedElementsAre("validatingwebhookconfiguration/v1",
                                                     "mutatingwebhookconfiguration/m1"));
  EXPECT_THAT(Bundles(*client.Object(kValidatingWebhookConfigurations, "", "v1")),
              ElementsAre(kBundle));
  EXPECT_THAT(Bundles(*client.Object(kMutatingWebhookConfigurations, "", "m1")),
              ElementsAre(kBundle, kBundle));
  EXPECT_EQ(client.Object(kValidatingWebhookConfigurations, "", "other"), unrelated);
}

TEST(InjectBundle, ConflictOnPatchIsRetriedFromAFreshRead) {
  Cluster cluster;
  cluster.client.InjectFailure(
      Verb::kPatch, kValidatingWebhookConfigurations,
      Error(ErrorCode::kConflict,
            "Operation cannot be fulfilled on validatingwebhookconfigurations"));
  auto outcome = InjectBundle(cluster.client, AllFour(), kBundle, Options(), cluster.clock);
  ASSERT_TRUE(outcome.has_value()) << outcome.error().message();
  EXPECT_EQ(outcome->patched_objects, 4);
  EXPECT_EQ(outcome->patched_slots, 7);
  EXPECT_THAT(Bundles(cluster.Vwc()), ElementsAre(kBundle, kBundle, kBundle));
  EXPECT_EQ(cluster.client.CountOf(Verb::kGet, kValidatingWebhookConfigurations, kVwc), 2);
}

TEST(InjectBundle, RejectedTestOperationIsRetriedFromAFreshRead) {
  Cluster cluster;
  // The MWC changes after it was read, and its patch's `test` fails on that change.
  InterposingClient client(cluster.client, [](FakeClient& other) {
    Json mwc = *other.Object(kMutatingWebhookConfigurations, "", kMwc);
    mwc["metadata"]["labels"]["changed"] = "yes";
    other.Put(kMutatingWebhookConfigurations, mwc);
  });
  cluster.client.InjectFailure(
      Verb::kPatch, kMutatingWebhookConfigurations,
      Error(ErrorCode::kInvalidArgument, "the server rejected our request: test operation failed"));
  auto outcome = InjectBundle(client, AllFour(), kBundle, Options(), cluster.clock);
  ASSERT_TRUE(outcome.has_value()) << outcome.error().message();
  EXPECT_EQ(outcome->patched_objects, 4);
  EXPECT_THAT(Bundles(cluster.Mwc()), ElementsAre(kBundle, kBundle));
  EXPECT_EQ(cluster.client.CountOf(Verb::kGet, kMutatingWebhookConfigurations, kMwc), 2);
}

TEST(InjectBundle, APatchRefusedAsInvalidWhileTheObjectIsUnchangedIsNotRetried) {
  Cluster cluster;
  const Json before = cluster.Mwc();
  cluster.client.InjectFailure(
      Verb::kPatch, kMutatingWebhookConfigurations,
      Error(ErrorCode::kInvalidArgument,
            "admission policy \"no-ca-bundles\" denied the request: caBundle is managed"),
      1000);
  auto outcome = InjectBundle(cluster.client, AllFour(), kBundle, Options(), cluster.clock);
  ASSERT_FALSE(outcome.has_value());
  EXPECT_EQ(outcome.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(outcome.error().message(),
              AllOf(StartsWith("patch mutatingwebhookconfiguration/"),
                    HasSubstr("denied the request: caBundle is managed")));
  EXPECT_EQ(cluster.client.CountOf(Verb::kPatch, kMutatingWebhookConfigurations), 1);
  EXPECT_EQ(cluster.Mwc(), before);
}

TEST(InjectBundle, WebhooksReorderedBeforeThePatchStillGetTheBundleAndKeepTheChange) {
  Cluster cluster;
  // After our read, someone reorders the VWC's webhooks and changes one of them: the patch
  // computed on the old order must not land, and the fresh one must keep their change.
  InterposingClient client(cluster.client, [](FakeClient& other) {
    Json vwc = *other.Object(kValidatingWebhookConfigurations, "", kVwc);
    Json reordered = Json::array({vwc["webhooks"][2], vwc["webhooks"][0], vwc["webhooks"][1]});
    reordered[0]["timeoutSeconds"] = 5;
    vwc["webhooks"] = reordered;
    other.Put(kValidatingWebhookConfigurations, vwc);
  });
  auto outcome = InjectBundle(client, AllFour(), kBundle, Options(), cluster.clock);
  ASSERT_TRUE(outcome.has_value()) << outcome.error().message();
  const Json vwc = cluster.Vwc();
  ASSERT_EQ(vwc["webhooks"].size(), 3u);
  EXPECT_EQ(vwc["webhooks"][0]["name"], "c.example.com");
  EXPECT_EQ(vwc["webhooks"][0]["timeoutSeconds"], 5);
  EXPECT_THAT(Bundles(vwc), ElementsAre(kBundle, kBundle, kBundle));
  EXPECT_EQ(cluster.client.CountOf(Verb::kPatch, kValidatingWebhookConfigurations, kVwc), 2);
}

TEST(InjectBundle, ForbiddenPatchIsAnErrorNamingTheObject) {
  Cluster cluster;
  const Json before = cluster.Vwc();
  cluster.client.InjectFailure(
      Verb::kPatch, kValidatingWebhookConfigurations,
      Error(ErrorCode::kPermissionDenied,
            "validatingwebhookconfigurations.admissionregistration.k8s.io \"policy\" is "
            "forbidden"));
  auto outcome = InjectBundle(cluster.client, AllFour(), kBundle, Options(), cluster.clock);
  ASSERT_FALSE(outcome.has_value());
  EXPECT_EQ(outcome.error().code(), ErrorCode::kPermissionDenied);
  EXPECT_THAT(
      outcome.error().message(),
      AllOf(StartsWith("patch validatingwebhookconfiguration/policy: "), HasSubstr("forbidden")));
  EXPECT_EQ(cluster.client.CountOf(Verb::kPatch, kValidatingWebhookConfigurations), 1);
  EXPECT_EQ(cluster.Vwc(), before);
}

TEST(InjectBundle, ConflictsForeverGiveUpAfterBoundedAttempts) {
  Cluster cluster;
  cluster.client.InjectFailure(Verb::kPatch, kApiServices,
                               Error(ErrorCode::kConflict, "the object has been modified"), 1000);
  auto outcome = InjectBundle(cluster.client, AllFour(), kBundle, Options(), cluster.clock);
  ASSERT_FALSE(outcome.has_value());
  EXPECT_EQ(outcome.error().code(), ErrorCode::kConflict);
  EXPECT_THAT(outcome.error().message(), HasSubstr("apiservice/v1beta1.metrics.example.com"));
  const int patches = cluster.client.CountOf(Verb::kPatch, kApiServices);
  EXPECT_GT(patches, 1);
  EXPECT_LE(patches, 10);
}

TEST(InjectBundle, WebhookConfigurationWithoutWebhooksIsAnErrorNamingIt) {
  FakeClock clock;
  FakeClient client;
  const Json empty =
      client.Put(kValidatingWebhookConfigurations, WebhookConfiguration("empty", {}));
  TargetSelection selection;
  selection.validating_webhooks = {"empty"};
  auto outcome = InjectBundle(client, selection, kBundle, Options(), clock);
  ASSERT_FALSE(outcome.has_value());
  EXPECT_EQ(outcome.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(outcome.error().message(),
              HasSubstr("ValidatingWebhookConfiguration empty has no webhooks"));
  EXPECT_EQ(client.Object(kValidatingWebhookConfigurations, "", "empty"), empty);
  EXPECT_EQ(client.WriteCount(), 0);
}

}  // namespace
}  // namespace inject_test
}  // namespace certctl::controller
