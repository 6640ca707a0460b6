#include "certctl/inject/patch.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/util/base64.h"

namespace certctl::inject {
namespace patch_test {
namespace {

using Json = nlohmann::json;
using ::testing::Each;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// BundlePatch treats the bundle as opaque text: PEM-shaped strings are enough here.
constexpr char kBundle[] = "-----BEGIN CERTIFICATE-----\nTkVX\n-----END CERTIFICATE-----\n";
constexpr char kOldBundle[] = "-----BEGIN CERTIFICATE-----\nT0xE\n-----END CERTIFICATE-----\n";

Json Webhook(const std::string& name, const std::string& bundle_pem) {
  Json client_config = {{"service", {{"namespace", "ns"}, {"name", "svc"}, {"path", "/v"}}}};
  if (!bundle_pem.empty()) {
    client_config["caBundle"] = Base64Encode(bundle_pem);
  }
  return {{"name", name},
          {"clientConfig", std::move(client_config)},
          {"rules", {{{"operations", {"CREATE"}}, {"resources", {"pods"}}}}},
          {"sideEffects", "None"},
          {"admissionReviewVersions", {"v1", "v1beta1"}}};
}

Json WebhookConfiguration(std::vector<Json> webhooks) {
  return {{"apiVersion", "admissionregistration.k8s.io/v1"},
          {"kind", "ValidatingWebhookConfiguration"},
          {"metadata",
           {{"name", "policy"},
            {"resourceVersion", "42"},
            {"labels", {{"app", "policy"}}},
            {"annotations", {{"note", "keep me"}}}}},
          {"webhooks", std::move(webhooks)}};
}

Json Crd(const std::string& bundle_pem) {
  return {{"apiVersion", "apiextensions.k8s.io/v1"},
          {"kind", "CustomResourceDefinition"},
          {"metadata", {{"name", "widgets.example.com"}}},
          {"spec",
           {{"group", "example.com"},
            {"names", {{"plural", "widgets"}, {"kind", "Widget"}}},
            {"conversion",
             {{"strategy", "Webhook"},
              {"webhook",
               {{"clientConfig",
                 {{"service", {{"namespace", "ns"}, {"name", "svc"}}},
                  {"caBundle", Base64Encode(bundle_pem)}}},
                {"conversionReviewVersions", {"v1"}}}}}}}}};
}

Json ApiService(const std::string& bundle_pem) {
  return {{"apiVersion", "apiregistration.k8s.io/v1"},
          {"kind", "APIService"},
          {"metadata", {{"name", "v1beta1.metrics.example.com"}}},
          {"spec",
           {{"group", "metrics.example.com"},
            {"version", "v1beta1"},
            {"service", {{"namespace", "ns"}, {"name", "svc"}}},
            {"groupPriorityMinimum", 100},
            {"caBundle", Base64Encode(bundle_pem)}}}};
}

Json MustPatch(TargetKind kind, const Json& object) {
  auto patch = BundlePatch(kind, object, kBundle);
  EXPECT_TRUE(patch.has_value()) << patch.error().message();
  EXPECT_TRUE(patch.has_value() && patch->has_value()) << "no patch for " << object.dump();
  return patch && *patch ? **patch : Json::array();
}

std::vector<Json> OpsOfKind(const Json& patch, const std::string& op) {
  std::vector<Json> found;
  for (const Json& operation : patch) {
    if (operation["op"] == op) {
      found.push_back(operation);
    }
  }
  return found;
}

// The paths where `before` and `after` differ, by an independent diff.
std::vector<std::string> ChangedPaths(const Json& before, const Json& after) {
  std::vector<std::string> paths;
  for (const Json& operation : Json::diff(before, after)) {
    paths.push_back(operation["path"].get<std::string>());
  }
  return paths;
}

TEST(BundlePatch, NothingToDoWhenEverySlotHoldsTheBundle) {
  const Json vwc =
      WebhookConfiguration({Webhook("a.example.com", kBundle), Webhook("b.example.com", kBundle),
                            Webhook("c.example.com", kBundle)});
  for (TargetKind kind :
       {TargetKind::kValidatingWebhookConfiguration, TargetKind::kMutatingWebhookConfiguration}) {
    auto patch = BundlePatch(kind, vwc, kBundle);
    ASSERT_TRUE(patch.has_value()) << patch.error().message();
    EXPECT_FALSE(patch->has_value()) << (*patch)->dump();
  }
  auto crd = BundlePatch(TargetKind::kCustomResourceDefinition, Crd(kBundle), kBundle);
  ASSERT_TRUE(crd.has_value()) << crd.error().message();
  EXPECT_FALSE(crd->has_value());
  auto api = BundlePatch(TargetKind::kApiService, ApiService(kBundle), kBundle);
  ASSERT_TRUE(api.has_value()) << api.error().message();
  EXPECT_FALSE(api->has_value());
}

TEST(BundlePatch, OnlyDifferingSlotsGetAnAdd) {
  const Json vwc =
      WebhookConfiguration({Webhook("a.example.com", kBundle), Webhook("b.example.com", kOldBundle),
                            Webhook("c.example.com", ""), Webhook("d.example.com", kBundle)});
  const Json patch = MustPatch(TargetKind::kValidatingWebhookConfiguration, vwc);
  const std::vector<Json> adds = OpsOfKind(patch, "add");
  ASSERT_EQ(adds.size(), 2u) << patch.dump();
  EXPECT_EQ(adds[0]["path"], "/webhooks/1/clientConfig/caBundle");
  EXPECT_EQ(adds[1]["path"], "/webhooks/2/clientConfig/caBundle");
  for (const Json& add : adds) {
    EXPECT_EQ(add["value"], Base64Encode(kBundle));
  }
  // Nothing but tests and adds.
  EXPECT_EQ(OpsOfKind(patch, "test").size() + adds.size(), patch.size());
}

TEST(BundlePatch, EveryWebhookAddIsPrecededByATestOfItsName) {
  const Json vwc =
      WebhookConfiguration({Webhook("a.example.com", ""), Webhook("b.example.com", kBundle),
                            Webhook("c.example.com", kOldBundle)});
  const Json patch = MustPatch(TargetKind::kMutatingWebhookConfiguration, vwc);
  const std::vector<std::pair<std::string, std::string>> expected = {{"0", "a.example.com"},
                                                                     {"2", "c.example.com"}};
  ASSERT_EQ(patch.size(), 2 * expected.size()) << patch.dump();
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const Json& test = patch[2 * i];
    const Json& add = patch[2 * i + 1];
    EXPECT_EQ(test, Json({{"op", "test"},
                          {"path", "/webhooks/" + expected[i].first + "/name"},
                          {"value", expected[i].second}}));
    EXPECT_EQ(add["op"], "add");
    EXPECT_EQ(add["path"], "/webhooks/" + expected[i].first + "/clientConfig/caBundle");
  }
}

TEST(BundlePatch, CrdWriteIsPinnedToTheWebhookStrategy) {
  const Json patch = MustPatch(TargetKind::kCustomResourceDefinition, Crd(kOldBundle));
  ASSERT_EQ(patch.size(), 2u) << patch.dump();
  EXPECT_EQ(patch[0],
            Json({{"op", "test"}, {"path", "/spec/conversion/strategy"}, {"value", "Webhook"}}));
  EXPECT_EQ(patch[1], Json({{"op", "add"},
                            {"path", "/spec/conversion/webhook/clientConfig/caBundle"},
                            {"value", Base64Encode(kBundle)}}));
}

TEST(BundlePatch, ApiServiceWritesSpecCaBundle) {
  Json api = ApiService(kOldBundle);
  const Json patch = MustPatch(TargetKind::kApiService, api);
  // Pinned by a test of the service it was read with, so it is safe to repeat and cannot
  // land on an APIService re-pointed at another server meanwhile.
  EXPECT_EQ(
      patch,
      Json::array(
          {Json({{"op", "test"},
                 {"path", "/spec/service"},
                 {"value", {{"namespace", "ns"}, {"name", "svc"}}}}),
           Json({{"op", "add"}, {"path", "/spec/caBundle"}, {"value", Base64Encode(kBundle)}})}));
  // A missing caBundle is filled the same way.
  api["spec"].erase("caBundle");
  EXPECT_EQ(MustPatch(TargetKind::kApiService, api), patch);
}

TEST(BundlePatch, AppliedPatchChangesOnlyCaBundleFields) {
  const std::vector<std::pair<TargetKind, Json>> targets = {
      {TargetKind::kValidatingWebhookConfiguration,
       WebhookConfiguration({Webhook("a.example.com", ""), Webhook("b.example.com", kBundle),
                             Webhook("c.example.com", kOldBundle)})},
      {TargetKind::kCustomResourceDefinition, Crd(kOldBundle)},
      {TargetKind::kApiService, ApiService("")},
  };
  for (const auto& target : targets) {
    const Json& original = target.second;
    const Json patch = MustPatch(target.first, original);
    Json patched;
    ASSERT_NO_THROW(patched = original.patch(patch)) << patch.dump();
    const std::vector<std::string> changed = ChangedPaths(original, patched);
    EXPECT_THAT(changed, Each(EndsWith("/caBundle"))) << Json::diff(original, patched).dump();
    EXPECT_EQ(changed.size(), OpsOfKind(patch, "add").size());

    // Every slot now holds the bundle: a second patch is empty.
    auto again = BundlePatch(target.first, patched, kBundle);
    ASSERT_TRUE(again.has_value()) << again.error().message();
    EXPECT_FALSE(again->has_value()) << (*again)->dump();
  }
}

TEST(BundlePatch, ReorderedWebhooksMakeThePatchFail) {
  const Json computed_on =
      WebhookConfiguration({Webhook("a.example.com", kBundle), Webhook("b.example.com", kOldBundle),
                            Webhook("c.example.com", kBundle)});
  const Json patch = MustPatch(TargetKind::kValidatingWebhookConfiguration, computed_on);

  // Someone moved b to the front in between: index 1 is now a.example.com.
  Json reordered = computed_on;
  reordered["webhooks"] = Json::array(
      {computed_on["webhooks"][1], computed_on["webhooks"][0], computed_on["webhooks"][2]});
  EXPECT_THROW((void)reordered.patch(patch), Json::exception);

  // The object is untouched, and a patch computed on the new order does the right thing.
  auto fresh = BundlePatch(TargetKind::kValidatingWebhookConfiguration, reordered, kBundle);
  ASSERT_TRUE(fresh.has_value()) << fresh.error().message();
  ASSERT_TRUE(fresh->has_value());
  const Json patched = reordered.patch(**fresh);
  EXPECT_EQ(ChangedPaths(reordered, patched),
            std::vector<std::string>{"/webhooks/0/clientConfig/caBundle"});
  EXPECT_EQ(patched["webhooks"][0]["name"], "b.example.com");
}

TEST(BundlePatch, ApiServiceRepointedAtAnotherServiceRejectsThePatch) {
  const Json api = ApiService(kOldBundle);
  const Json patch = MustPatch(TargetKind::kApiService, api);
  Json repointed = api;
  repointed["spec"]["service"]["name"] = "other";
  EXPECT_THROW((void)repointed.patch(patch), Json::exception);
  // A local APIService (no service) gets a plain add: there is nothing to pin it to.
  Json local = api;
  local["spec"].erase("service");
  EXPECT_EQ(OpsOfKind(MustPatch(TargetKind::kApiService, local), "test").size(), 0U);
}

TEST(BundlePatch, CrdThatStoppedUsingWebhookConversionRejectsThePatch) {
  const Json crd = Crd(kOldBundle);
  const Json patch = MustPatch(TargetKind::kCustomResourceDefinition, crd);
  Json changed = crd;
  changed["spec"]["conversion"]["strategy"] = "None";
  EXPECT_THROW((void)changed.patch(patch), Json::exception);
}

TEST(BundlePatch, ErrorsOfReadBundleSlotsPassThrough) {
  Json empty = WebhookConfiguration({});
  auto patch = BundlePatch(TargetKind::kValidatingWebhookConfiguration, empty, kBundle);
  ASSERT_FALSE(patch.has_value());
  EXPECT_EQ(patch.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(patch.error().message(), HasSubstr("policy has no webhooks"));

  Json crd = Crd(kOldBundle);
  crd["spec"]["conversion"] = {{"strategy", "None"}};
  auto none = BundlePatch(TargetKind::kCustomResourceDefinition, crd, kBundle);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(none.error().message(), HasSubstr("spec.conversion.strategy"));
}

TEST(BundlePatch, PatchIsValidJsonPatchEvenForAnEmptyBundleField) {
  // caBundle: "" and caBundle absent both count as empty and get filled.
  Json vwc = WebhookConfiguration({Webhook("a.example.com", ""), Webhook("b.example.com", "")});
  vwc["webhooks"][1]["clientConfig"]["caBundle"] = "";
  const Json patch = MustPatch(TargetKind::kValidatingWebhookConfiguration, vwc);
  const Json patched = vwc.patch(patch);
  for (const Json& webhook : patched["webhooks"]) {
    EXPECT_EQ(webhook["clientConfig"]["caBundle"], Base64Encode(kBundle));
  }
  EXPECT_THAT(OpsOfKind(patch, "replace"), IsEmpty());
}

TEST(FailClosedPatch, OnlyIgnoreBecomesFailEachGuardedByTests) {
  const Json object = {{"webhooks",
                        {{{"name", "a.example.com"}, {"failurePolicy", "Ignore"}},
                         {{"name", "b.example.com"}, {"failurePolicy", "Fail"}},
                         {{"name", "c.example.com"}},
                         {{"name", "d.example.com"}, {"failurePolicy", "Ignore"}}}}};
  const auto patch = FailClosedPatch(TargetKind::kMutatingWebhookConfiguration, object);
  ASSERT_TRUE(patch.has_value());
  EXPECT_EQ(*patch, Json::parse(R"([
    {"op": "test", "path": "/webhooks/0/name", "value": "a.example.com"},
    {"op": "test", "path": "/webhooks/0/failurePolicy", "value": "Ignore"},
    {"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Fail"},
    {"op": "test", "path": "/webhooks/3/name", "value": "d.example.com"},
    {"op": "test", "path": "/webhooks/3/failurePolicy", "value": "Ignore"},
    {"op": "replace", "path": "/webhooks/3/failurePolicy", "value": "Fail"}])"));
}

TEST(FailClosedPatch, WithAFilterOnlyTheEntriesItNamesAreClosed) {
  const Json object = {{"webhooks",
                        {{{"name", "a"}, {"failurePolicy", "Ignore"}},
                         {{"name", "b"}, {"failurePolicy", "Ignore"}}}}};
  const auto patch = FailClosedPatch(TargetKind::kValidatingWebhookConfiguration, object,
                                     [](const std::string& entry) { return entry == "b"; });
  ASSERT_TRUE(patch.has_value());
  EXPECT_EQ(patch->back(),
            (Json{{"op", "replace"}, {"path", "/webhooks/1/failurePolicy"}, {"value", "Fail"}}));
  EXPECT_EQ(patch->size(), 3u);  // two tests and the replace, for b alone
  EXPECT_FALSE(
      FailClosedPatch(TargetKind::kValidatingWebhookConfiguration, object, [](const std::string&) {
        return false;
      }).has_value());
}

TEST(FailClosedPatch, NothingWhenNoEntryHasIgnoreOrTheKindHasNoPolicy) {
  EXPECT_FALSE(
      FailClosedPatch(TargetKind::kValidatingWebhookConfiguration,
                      {{"webhooks", {{{"name", "a.example.com"}, {"failurePolicy", "Fail"}}}}})
          .has_value());
  EXPECT_FALSE(
      FailClosedPatch(TargetKind::kValidatingWebhookConfiguration, Json::object()).has_value());
  EXPECT_FALSE(FailClosedPatch(TargetKind::kCustomResourceDefinition,
                               {{"webhooks", {{{"name", "a"}, {"failurePolicy", "Ignore"}}}}})
                   .has_value());
  // An entry without a name cannot be pinned by a test: left alone.
  EXPECT_FALSE(FailClosedPatch(TargetKind::kValidatingWebhookConfiguration,
                               {{"webhooks", {{{"failurePolicy", "Ignore"}}}}})
                   .has_value());
}

}  // namespace
}  // namespace patch_test
}  // namespace certctl::inject
