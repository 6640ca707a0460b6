#include "certctl/controller/converge.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/controller/rotation.h"
#include "certctl/pki/certificate.h"
#include "certctl/util/base64.h"

#include "fakes/fake_client.h"
#include "fakes/fake_clock.h"
#include "support/target_objects.h"

namespace certctl::controller {
namespace converge_test {
namespace {

using Json = nlohmann::json;
using certctl::testing::FakeClient;
using certctl::testing::FakeClock;
using certctl::testing::Verb;
using ::testing::ElementsAre;

constexpr char kNs[] = "webhooks";
constexpr char kName[] = "webhook-server-cert";

SecretSpec Spec() {
  SecretSpec spec;
  spec.ns = kNs;
  spec.name = kName;
  spec.identity.service = "svc";
  spec.identity.namespace_name = kNs;
  spec.ca.common_name = "svc-ca";
  return spec;
}

TargetSelection Targets() {
  TargetSelection targets;
  targets.validating_webhooks = {"hook"};
  return targets;
}

Json Vwc() {
  return certctl::testing::WebhookConfiguration("hook",
                                                {certctl::testing::WebhookEntry("a.hook.io", kNs)});
}

std::string Data(const FakeClient& api, const std::string& key) {
  const Json secret = api.Object(kube::kSecrets, kNs, kName).value();
  return Base64Decode(secret["data"][key].get<std::string>()).value();
}

std::string Bundle(const FakeClient& api) {
  const Json vwc = api.Object(kube::kValidatingWebhookConfigurations, "", "hook").value();
  return Base64Decode(vwc["webhooks"][0]["clientConfig"]["caBundle"].get<std::string>()).value();
}

// The steps as the callbacks see them, in order.
struct Recorder {
  std::vector<std::string> steps;

  ConvergeOptions Options() {
    ConvergeOptions options;
    options.inject_options.wait_for_targets = std::chrono::seconds(0);
    options.on_secret = [this](const SecretOutcome& outcome) {
      steps.emplace_back(SecretActionName(outcome.action));
    };
    options.on_inject = [this](const InjectOutcome& outcome) {
      steps.push_back("inject " + std::to_string(outcome.patched_objects));
    };
    return options;
  }
};

TEST(Converge, ARequestedCaRotationIsCarriedThroughStepTwoOnceTheTargetsReadItBack) {
  FakeClient api;
  FakeClock clock;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc());
  Recorder first;
  ASSERT_TRUE(Converge(api, Spec(), Targets(), first.Options(), clock));
  EXPECT_THAT(first.steps, ElementsAre("created", "inject 1"));
  const std::string old_ca = Data(api, "ca.crt");

  Json secret = api.Object(kube::kSecrets, kNs, kName).value();
  secret["metadata"]["annotations"][kRotateAnnotation] = "ca";
  api.Put(kube::kSecrets, secret);
  Recorder rotation;
  auto outcome = Converge(api, Spec(), Targets(), rotation.Options(), clock);
  ASSERT_TRUE(outcome) << outcome.error().message();
  // Step 1, the bundle written, a second look that writes nothing, a third one after the API
  // servers' caches had time to see the bundle, then step 2.
  EXPECT_THAT(rotation.steps, ElementsAre("ca-rotation-started", "inject 1", "inject 0", "inject 0",
                                          "leaf-moved-to-new-ca"));
  EXPECT_THAT(clock.sleeps(), ElementsAre(std::chrono::milliseconds(kBundlePropagation)));
  EXPECT_EQ(outcome->rotation.phase, RotationPhase::kOverlapping);
  EXPECT_EQ(Bundle(api), Data(api, "ca.crt"));
  EXPECT_EQ(pki::ParseCertificateBundle(Data(api, "ca.crt"))->size(), 2u);
  EXPECT_TRUE(Data(api, "ca.crt").ends_with(old_ca));
}

TEST(Converge, ABundleWipedDuringThePropagationWaitIsWrittenAndWaitedForAgain) {
  FakeClient api;
  FakeClock clock;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc());
  ASSERT_TRUE(Converge(api, Spec(), Targets(), Recorder().Options(), clock));
  Json secret = api.Object(kube::kSecrets, kNs, kName).value();
  secret["metadata"]["annotations"][kRotateAnnotation] = "ca";
  api.Put(kube::kSecrets, secret);

  Recorder rotation;
  ConvergeOptions options = rotation.Options();
  bool wiped = false;
  options.on_inject = [&](const InjectOutcome& outcome) {
    rotation.steps.push_back("inject " + std::to_string(outcome.patched_objects));
    if (outcome.patched_objects == 0 && !wiped) {
      api.Put(kube::kValidatingWebhookConfigurations, Vwc());  // a GitOps sync, mid-wait
      wiped = true;
    }
  };
  auto outcome = Converge(api, Spec(), Targets(), options, clock);
  ASSERT_TRUE(outcome) << outcome.error().message();
  EXPECT_THAT(rotation.steps, ElementsAre("ca-rotation-started", "inject 1", "inject 0", "inject 1",
                                          "inject 0", "inject 0", "leaf-moved-to-new-ca"));
  EXPECT_EQ(clock.sleeps().size(), 2u);
  EXPECT_EQ(Bundle(api), Data(api, "ca.crt"));
}

TEST(Converge, WithoutTargetsARotationStopsAfterStepOne) {
  FakeClient api;
  FakeClock clock;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc());
  ASSERT_TRUE(Converge(api, Spec(), Targets(), Recorder().Options(), clock));
  const std::string leaf = Data(api, "tls.crt");
  Json secret = api.Object(kube::kSecrets, kNs, kName).value();
  secret["metadata"]["annotations"][kRotateAnnotation] = "ca";
  api.Put(kube::kSecrets, secret);
  api.ClearRequests();

  Recorder secret_phase;
  ConvergeOptions options = secret_phase.Options();
  options.inject = false;
  auto outcome = Converge(api, Spec(), TargetSelection{}, options, clock);
  ASSERT_TRUE(outcome) << outcome.error().message();
  EXPECT_THAT(secret_phase.steps, ElementsAre("ca-rotation-started"));
  EXPECT_EQ(outcome->rotation.phase, RotationPhase::kTrusting);
  EXPECT_EQ(Data(api, "tls.crt"), leaf);
  EXPECT_EQ(api.CountOf(Verb::kPatch, kube::kValidatingWebhookConfigurations), 0);
}

TEST(Converge, TheSecretPhaseDoesNotWaitForATargetTheUpgradeCreatesAndLeavesTheLeaf) {
  FakeClient api;
  FakeClock clock;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc());
  ASSERT_TRUE(Converge(api, Spec(), Targets(), Recorder().Options(), clock));
  const std::string leaf = Data(api, "tls.crt");
  Json secret = api.Object(kube::kSecrets, kNs, kName).value();
  secret["metadata"]["annotations"][kRotateAnnotation] = "ca";
  api.Put(kube::kSecrets, secret);
  // The upgrade renames the configuration: "hook-v2" is created only after the pre-upgrade
  // hook, which must not wait for it (a failed hook fails the upgrade).
  TargetSelection upgraded = Targets();
  upgraded.validating_webhooks.push_back("hook-v2");

  Recorder secret_phase;
  ConvergeOptions options = secret_phase.Options();
  options.inject = false;
  options.inject_options.wait_for_targets = std::chrono::minutes(2);
  auto outcome = Converge(api, Spec(), upgraded, options, clock);
  ASSERT_TRUE(outcome) << outcome.error().message();
  EXPECT_THAT(secret_phase.steps, ElementsAre("ca-rotation-started", "inject 1"));
  EXPECT_THAT(clock.sleeps(), ::testing::IsEmpty());
  EXPECT_EQ(outcome->rotation.phase, RotationPhase::kTrusting);
  EXPECT_EQ(Data(api, "tls.crt"), leaf);  // still issued by the CA "hook" trusted before
  EXPECT_EQ(Bundle(api), Data(api, "ca.crt"));

  // After the upgrade the inject phase finds both and moves the leaf.
  Json renamed = Vwc();
  renamed["metadata"]["name"] = "hook-v2";
  api.Put(kube::kValidatingWebhookConfigurations, renamed);
  Recorder inject_phase;
  options = inject_phase.Options();
  options.ensure_secret = false;
  outcome = Converge(api, Spec(), upgraded, options, clock);
  ASSERT_TRUE(outcome) << outcome.error().message();
  EXPECT_THAT(inject_phase.steps,
              ElementsAre("inject 1", "inject 0", "inject 0", "leaf-moved-to-new-ca"));
  EXPECT_EQ(outcome->rotation.phase, RotationPhase::kOverlapping);
  EXPECT_NE(Data(api, "tls.crt"), leaf);
}

TEST(Converge, AnAdoptedSecretWithoutCaKeyStartsItsRotationInTheSameRun) {
  FakeClient api;
  FakeClock clock;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc());
  ASSERT_TRUE(Converge(api, Spec(), Targets(), Recorder().Options(), clock));
  // What another tool leaves: no ca.key, no certctl label.
  Json secret = api.Object(kube::kSecrets, kNs, kName).value();
  secret["data"].erase("ca.key");
  secret["metadata"].erase("labels");
  api.Put(kube::kSecrets, secret);

  SecretSpec spec = Spec();
  spec.adopt = true;
  Recorder adopting;
  auto outcome = Converge(api, spec, Targets(), adopting.Options(), clock);
  ASSERT_TRUE(outcome) << outcome.error().message();
  EXPECT_THAT(adopting.steps, ElementsAre("adopted", "ca-rotation-started", "inject 1", "inject 0",
                                          "inject 0", "leaf-moved-to-new-ca"));
}

TEST(Converge, TheInjectPhaseRefusesASecretThatIsNotValid) {
  FakeClient api;
  FakeClock clock;
  api.Put(kube::kValidatingWebhookConfigurations, Vwc());
  ConvergeOptions options = Recorder().Options();
  options.ensure_secret = false;
  auto outcome = Converge(api, Spec(), Targets(), options, clock);
  ASSERT_FALSE(outcome);
  EXPECT_EQ(outcome.error().code(), ErrorCode::kNotFound);
  EXPECT_THAT(outcome.error().message(), ::testing::HasSubstr("run the secret phase first"));
  EXPECT_EQ(api.WriteCount(), 0);
}

}  // namespace
}  // namespace converge_test
}  // namespace certctl::controller
