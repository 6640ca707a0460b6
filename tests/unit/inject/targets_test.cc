#include "certctl/inject/targets.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/util/base64.h"

namespace certctl::inject {
namespace targets_test {
namespace {

using Json = nlohmann::json;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Stand-ins for PEM text: ReadBundleSlots only decodes, it does not parse certificates.
const std::string kBundleA = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
const std::string kBundleB = "-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----\n";

Json Webhook(const std::string& name, const Json& client_config) {
  return {{"name", name}, {"clientConfig", client_config}, {"admissionReviewVersions", {"v1"}}};
}

Json WithBundle(const std::string& pem) {
  return {{"service", {{"namespace", "ns"}, {"name", "svc"}, {"path", "/validate"}}},
          {"caBundle", Base64Encode(pem)}};
}

Json Configuration(const std::string& name, const Json& webhooks) {
  Json object = {{"apiVersion", "admissionregistration.k8s.io/v1"}, {"metadata", {{"name", name}}}};
  if (!webhooks.is_discarded()) {
    object["webhooks"] = webhooks;
  }
  return object;
}

Json Crd(const Json& conversion) {
  return {{"apiVersion", "apiextensions.k8s.io/v1"},
          {"kind", "CustomResourceDefinition"},
          {"metadata", {{"name", "widgets.example.com"}}},
          {"spec", {{"group", "example.com"}, {"conversion", conversion}}}};
}

Json ApiService(const Json& spec) {
  Json object = {{"apiVersion", "apiregistration.k8s.io/v1"},
                 {"kind", "APIService"},
                 {"metadata", {{"name", "v1beta1.metrics.example.com"}}}};
  if (!spec.is_discarded()) {
    object["spec"] = spec;
  }
  return object;
}

std::vector<std::string> Webhooks(const std::vector<BundleSlot>& slots) {
  std::vector<std::string> names;
  for (const BundleSlot& slot : slots) {
    names.push_back(slot.webhook);
  }
  return names;
}

std::vector<std::string> Paths(const std::vector<BundleSlot>& slots) {
  std::vector<std::string> paths;
  for (const BundleSlot& slot : slots) {
    paths.push_back(slot.path);
  }
  return paths;
}

std::vector<std::string> Bundles(const std::vector<BundleSlot>& slots) {
  std::vector<std::string> bundles;
  for (const BundleSlot& slot : slots) {
    bundles.push_back(slot.bundle);
  }
  return bundles;
}

void ExpectInvalid(TargetKind kind, const Json& object, const std::string& object_name,
                   const std::string& field) {
  auto slots = ReadBundleSlots(kind, object);
  ASSERT_FALSE(slots.has_value()) << object.dump();
  EXPECT_EQ(slots.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(slots.error().message(), AllOf(HasSubstr(object_name), HasSubstr(field)));
}

TEST(InjectTargets, NamesEveryKindAsTheApiDoes) {
  EXPECT_EQ(TargetKindName(TargetKind::kValidatingWebhookConfiguration),
            "ValidatingWebhookConfiguration");
  EXPECT_EQ(TargetKindName(TargetKind::kMutatingWebhookConfiguration),
            "MutatingWebhookConfiguration");
  EXPECT_EQ(TargetKindName(TargetKind::kCustomResourceDefinition), "CustomResourceDefinition");
  EXPECT_EQ(TargetKindName(TargetKind::kApiService), "APIService");
}

TEST(InjectTargets, WebhookConfigurationHasOneSlotPerWebhookInOrder) {
  const Json object =
      Configuration("hooks", Json::array({Webhook("c.example.com", WithBundle(kBundleA)),
                                          Webhook("a.example.com", WithBundle(kBundleB)),
                                          Webhook("b.example.com", WithBundle(kBundleA))}));
  for (TargetKind kind :
       {TargetKind::kValidatingWebhookConfiguration, TargetKind::kMutatingWebhookConfiguration}) {
    auto slots = ReadBundleSlots(kind, object);
    ASSERT_TRUE(slots.has_value()) << slots.error().message();
    EXPECT_THAT(Webhooks(*slots), ElementsAre("c.example.com", "a.example.com", "b.example.com"));
    EXPECT_THAT(Paths(*slots), ElementsAre("/webhooks/0/clientConfig/caBundle",
                                           "/webhooks/1/clientConfig/caBundle",
                                           "/webhooks/2/clientConfig/caBundle"));
    EXPECT_THAT(Bundles(*slots), ElementsAre(kBundleA, kBundleB, kBundleA));
  }
}

TEST(InjectTargets, PathsPointAtTheEncodedFields) {
  const Json vwc = Configuration("hooks", Json::array({Webhook("a", WithBundle(kBundleA)),
                                                       Webhook("b", WithBundle(kBundleB))}));
  const Json crd =
      Crd({{"strategy", "Webhook"}, {"webhook", {{"clientConfig", WithBundle(kBundleA)}}}});
  const Json api =
      ApiService({{"caBundle", Base64Encode(kBundleB)}, {"groupPriorityMinimum", 100}});
  const std::vector<std::pair<TargetKind, const Json*>> cases = {
      {TargetKind::kValidatingWebhookConfiguration, &vwc},
      {TargetKind::kCustomResourceDefinition, &crd},
      {TargetKind::kApiService, &api}};
  for (const auto& [kind, object] : cases) {
    auto slots = ReadBundleSlots(kind, *object);
    ASSERT_TRUE(slots.has_value()) << slots.error().message();
    for (const BundleSlot& slot : *slots) {
      const Json::json_pointer pointer(slot.path);
      ASSERT_TRUE(object->contains(pointer)) << slot.path;
      EXPECT_EQ(object->at(pointer), Base64Encode(slot.bundle)) << slot.path;
    }
  }
}

TEST(InjectTargets, AbsentNullOrEmptyCaBundleIsAnEmptyBundle) {
  Json without = WithBundle(kBundleA);
  without.erase("caBundle");
  Json null_bundle = WithBundle(kBundleA);
  null_bundle["caBundle"] = nullptr;
  Json empty = WithBundle(kBundleA);
  empty["caBundle"] = "";
  const Json object = Configuration(
      "hooks", Json::array({Webhook("absent", without), Webhook("null", null_bundle),
                            Webhook("empty", empty), Webhook("set", WithBundle(kBundleB))}));
  auto slots = ReadBundleSlots(TargetKind::kMutatingWebhookConfiguration, object);
  ASSERT_TRUE(slots.has_value()) << slots.error().message();
  EXPECT_THAT(Webhooks(*slots), ElementsAre("absent", "null", "empty", "set"));
  EXPECT_THAT(Bundles(*slots), ElementsAre("", "", "", kBundleB));
}

TEST(InjectTargets, WebhookWithoutNameHasAnEmptyName) {
  Json webhook = Webhook("", WithBundle(kBundleA));
  webhook.erase("name");
  auto slots = ReadBundleSlots(TargetKind::kValidatingWebhookConfiguration,
                               Configuration("hooks", Json::array({webhook})));
  ASSERT_TRUE(slots.has_value()) << slots.error().message();
  EXPECT_THAT(Webhooks(*slots), ElementsAre(""));
  EXPECT_THAT(Bundles(*slots), ElementsAre(kBundleA));
}

TEST(InjectTargets, WebhookConfigurationWithoutWebhooksIsInvalid) {
  const Json cases[] = {Configuration("hooks", Json(Json::value_t::discarded)),
                        Configuration("hooks", Json::array()), Configuration("hooks", nullptr),
                        Configuration("hooks", Json::object())};
  for (const Json& object : cases) {
    ExpectInvalid(TargetKind::kValidatingWebhookConfiguration, object,
                  "ValidatingWebhookConfiguration hooks", "has no webhooks");
    ExpectInvalid(TargetKind::kMutatingWebhookConfiguration, object,
                  "MutatingWebhookConfiguration hooks", "has no webhooks");
  }
}

TEST(InjectTargets, WebhookWithoutClientConfigIsInvalid) {
  Json webhook = Webhook("b", WithBundle(kBundleA));
  webhook.erase("clientConfig");
  ExpectInvalid(TargetKind::kValidatingWebhookConfiguration,
                Configuration("hooks", Json::array({Webhook("a", WithBundle(kBundleA)), webhook})),
                "ValidatingWebhookConfiguration hooks", "webhooks[1] has no clientConfig");
}

TEST(InjectTargets, CaBundleThatIsNotBase64IsInvalid) {
  Json client_config = WithBundle(kBundleA);
  client_config["caBundle"] = kBundleA;  // PEM pasted without encoding
  ExpectInvalid(TargetKind::kMutatingWebhookConfiguration,
                Configuration("hooks", Json::array({Webhook("a", WithBundle(kBundleA)),
                                                    Webhook("b", client_config)})),
                "MutatingWebhookConfiguration hooks", "webhooks[1].clientConfig.caBundle");
}

TEST(InjectTargets, CaBundleThatIsNotAStringIsInvalid) {
  Json client_config = WithBundle(kBundleA);
  client_config["caBundle"] = 42;
  ExpectInvalid(TargetKind::kValidatingWebhookConfiguration,
                Configuration("hooks", Json::array({Webhook("a", client_config)})),
                "ValidatingWebhookConfiguration hooks", "webhooks[0].clientConfig.caBundle");
}

TEST(InjectTargets, UnnamedObjectIsNamedAsSuch) {
  Json object = Configuration("x", Json::array());
  object.erase("metadata");
  ExpectInvalid(TargetKind::kValidatingWebhookConfiguration, object,
                "ValidatingWebhookConfiguration <unnamed>", "has no webhooks");
}

TEST(InjectTargets, CrdWithWebhookConversionHasOneSlot) {
  auto slots = ReadBundleSlots(
      TargetKind::kCustomResourceDefinition,
      Crd({{"strategy", "Webhook"},
           {"webhook",
            {{"clientConfig", WithBundle(kBundleA)}, {"conversionReviewVersions", {"v1"}}}}}));
  ASSERT_TRUE(slots.has_value()) << slots.error().message();
  EXPECT_THAT(Webhooks(*slots), ElementsAre(""));
  EXPECT_THAT(Paths(*slots), ElementsAre("/spec/conversion/webhook/clientConfig/caBundle"));
  EXPECT_THAT(Bundles(*slots), ElementsAre(kBundleA));
}

TEST(InjectTargets, CrdWithoutCaBundleHasAnEmptySlot) {
  auto slots = ReadBundleSlots(
      TargetKind::kCustomResourceDefinition,
      Crd({{"strategy", "Webhook"},
           {"webhook",
            {{"clientConfig", {{"service", {{"name", "svc"}, {"namespace", "ns"}}}}}}}}));
  ASSERT_TRUE(slots.has_value()) << slots.error().message();
  EXPECT_THAT(Bundles(*slots), ElementsAre(""));
}

TEST(InjectTargets, CrdWithoutWebhookStrategyIsInvalid) {
  ExpectInvalid(TargetKind::kCustomResourceDefinition, Crd({{"strategy", "None"}}),
                "CustomResourceDefinition widgets.example.com", "spec.conversion.strategy");
  Json without_conversion = Crd(Json::object());
  without_conversion["spec"].erase("conversion");
  ExpectInvalid(TargetKind::kCustomResourceDefinition, without_conversion,
                "CustomResourceDefinition widgets.example.com", "spec.conversion.strategy");
}

TEST(InjectTargets, CrdWebhookWithoutClientConfigIsInvalid) {
  ExpectInvalid(TargetKind::kCustomResourceDefinition,
                Crd({{"strategy", "Webhook"}, {"webhook", {{"conversionReviewVersions", {"v1"}}}}}),
                "CustomResourceDefinition widgets.example.com",
                "spec.conversion.webhook.clientConfig");
}

TEST(InjectTargets, CrdCaBundleThatIsNotBase64IsInvalid) {
  ExpectInvalid(TargetKind::kCustomResourceDefinition,
                Crd({{"strategy", "Webhook"},
                     {"webhook", {{"clientConfig", {{"caBundle", "not base64!"}}}}}}),
                "CustomResourceDefinition widgets.example.com",
                "spec.conversion.webhook.clientConfig.caBundle");
}

TEST(InjectTargets, ApiServiceHasOneSlotInItsSpec) {
  auto slots = ReadBundleSlots(
      TargetKind::kApiService,
      ApiService({{"caBundle", Base64Encode(kBundleB)}, {"service", {{"name", "metrics"}}}}));
  ASSERT_TRUE(slots.has_value()) << slots.error().message();
  EXPECT_THAT(Webhooks(*slots), ElementsAre(""));
  EXPECT_THAT(Paths(*slots), ElementsAre("/spec/caBundle"));
  EXPECT_THAT(Bundles(*slots), ElementsAre(kBundleB));
}

TEST(InjectTargets, ApiServiceWithoutCaBundleHasAnEmptySlot) {
  auto slots =
      ReadBundleSlots(TargetKind::kApiService, ApiService({{"insecureSkipTLSVerify", true}}));
  ASSERT_TRUE(slots.has_value()) << slots.error().message();
  EXPECT_THAT(Bundles(*slots), ElementsAre(""));
}

TEST(InjectTargets, ApiServiceWithoutSpecIsInvalid) {
  ExpectInvalid(TargetKind::kApiService, ApiService(Json(Json::value_t::discarded)),
                "APIService v1beta1.metrics.example.com", "has no spec");
}

TEST(InjectTargets, ApiServiceCaBundleThatIsNotBase64IsInvalid) {
  ExpectInvalid(TargetKind::kApiService, ApiService({{"caBundle", "QQ="}}),
                "APIService v1beta1.metrics.example.com", "spec.caBundle");
}

}  // namespace
}  // namespace targets_test
}  // namespace certctl::inject
