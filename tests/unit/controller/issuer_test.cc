#include "certctl/controller/issuer.h"

#include <chrono>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/controller/ensure_secret.h"
#include "certctl/controller/rotation.h"
#include "certctl/pki/certificate.h"
#include "certctl/util/base64.h"
#include "certctl/util/duration.h"

#include "fakes/fake_client.h"
#include "fakes/fake_clock.h"

namespace certctl::controller {
namespace issuer_test {
namespace {

using Json = nlohmann::json;
using certctl::testing::FakeClient;
using certctl::testing::FakeClock;
using certctl::testing::Verb;
using kube::kSecrets;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kNs[] = "webhooks";
constexpr char kName[] = "webhook-server-cert";
constexpr char kObject[] = "secret/webhooks/webhook-server-cert";

const IssuerSettings kDefaults = {{"key-type", "ecdsa-p256"},
                                  {"cluster-domain", "cluster.local"},
                                  {"ca-validity", "10y"},
                                  {"cert-validity", "10y"}};
const IssuerSettings kCorp = {{"key-type", "rsa-2048"},
                              {"cluster-domain", "corp.local"},
                              {"ca-name", "other-ca"},
                              {"ca-validity", "10y"},
                              {"cert-validity", "10y"}};

Issuer Instance(const std::string& identity, TimePoint started, IssuerSettings settings,
                const std::string& command = "run") {
  return Issuer{.command = command,
                .identity = identity,
                .started = started,
                .settings = std::move(settings)};
}

// The Secret as `run` with `issuer` and these flags would ask for it.
SecretSpec Spec(const Issuer& issuer, const std::string& cluster_domain) {
  SecretSpec spec;
  spec.ns = kNs;
  spec.name = kName;
  spec.identity.service = "svc";
  spec.identity.namespace_name = kNs;
  spec.identity.cluster_domain = cluster_domain;
  spec.ca.common_name = "svc-ca";
  spec.issuer = issuer;
  return spec;
}

Json Stored(const FakeClient& client) {
  return client.Object(kSecrets, kNs, kName).value_or(Json::object());
}

std::string Annotation(const Json& secret, const std::string& key) {
  const Json annotations =
      secret.value("metadata", Json::object()).value("annotations", Json::object());
  return annotations.value(key, "");
}

std::vector<std::string> LeafNames(const Json& secret) {
  auto pem = Base64Decode(secret.at("data").at("tls.crt").get<std::string>());
  auto leaf = pki::Certificate::FromPem(pem.value_or(""));
  return leaf ? leaf->Info().dns_names : std::vector<std::string>();
}

SecretOutcome MustEnsure(FakeClient& client, const SecretSpec& spec, const FakeClock& clock) {
  auto outcome = EnsureSecret(client, spec, clock);
  EXPECT_TRUE(outcome.has_value()) << outcome.error().message();
  return outcome.value_or(SecretOutcome{});
}

// Two `certctl run` with different settings on one Secret: `early` started first and made it.
struct TwoInstances {
  FakeClock clock;
  FakeClient client;
  Issuer early = Instance("hook-a_1", clock.Now(), kDefaults);
  Issuer late = Instance("hook-b_2", clock.Now() + std::chrono::minutes(1), kCorp);
  SecretSpec early_spec = Spec(early, "cluster.local");
  SecretSpec late_spec = Spec(late, "corp.local");

  TwoInstances() {
    MustEnsure(client, early_spec, clock);
    clock.Advance(std::chrono::minutes(2));
  }
};

TEST(IssuerSettings, RoundTripWithTheSeparatorsInAValue) {
  const IssuerSettings settings = {{"ca-organization", "Acme, Inc. = 100%"}, {"key-type", "rsa"}};
  const std::string text = FormatSettings(settings);
  EXPECT_EQ(text, "ca-organization=Acme%2C Inc. %3D 100%25,key-type=rsa");
  EXPECT_EQ(ParseSettings(text), settings);
  EXPECT_THAT(ParseSettings("no-equals,key-type=x"), ElementsAre(std::pair{"key-type", "x"}));
}

TEST(IssuerSettings, DifferencesNameBothValuesAndADefaultForWhatOneSideLacks) {
  EXPECT_THAT(DifferingSettings(kDefaults, kCorp),
              ElementsAre("key-type rsa-2048 (here: ecdsa-p256)",
                          "cluster-domain corp.local (here: cluster.local)",
                          "ca-name other-ca (here: default)"));
  EXPECT_TRUE(DifferingSettings(kDefaults, kDefaults).empty());
}

TEST(YieldsTo, OnlyAnEarlierRunYieldsToALaterRunWithOtherSettings) {
  const TimePoint t0 = TimePoint(std::chrono::seconds(1800000000));
  const Issuer self = Instance("a_1", t0, kDefaults);
  const auto recorded = [](const std::string& name, std::optional<TimePoint> started,
                           IssuerSettings settings) {
    return RecordedInstance{.name = name, .started = started, .settings = std::move(settings)};
  };
  const TimePoint later = t0 + std::chrono::seconds(5);
  EXPECT_TRUE(YieldsTo(self, recorded("certctl run b_2", later, kCorp)));
  EXPECT_FALSE(YieldsTo(self, recorded("certctl run b_2", t0 - std::chrono::seconds(5), kCorp)));
  EXPECT_FALSE(YieldsTo(self, recorded("certctl run b_2", later, kDefaults)));  // same settings
  EXPECT_FALSE(YieldsTo(self, recorded("certctl job b_2", later, kCorp)));      // one-shot
  EXPECT_FALSE(YieldsTo(self, recorded("certctl run b_2", std::nullopt, kCorp)));
  EXPECT_FALSE(YieldsTo(self, recorded(self.Name(), later, kCorp)));  // itself
  const Issuer job = Instance("a_1", t0, kDefaults, "job");
  EXPECT_FALSE(YieldsTo(job, recorded("certctl run b_2", later, kCorp)));
}

TEST(YieldsTo, InstancesStartedWithinOneMillisecondAgreeOnWhichOneYields) {
  // Started 0.2 ms and 0.7 ms into one millisecond: recorded to the millisecond, the names
  // decide, and exactly one of the two yields.
  const TimePoint milli = TimePoint(std::chrono::seconds(1800000000));
  const Issuer a = Instance("a_1", milli + std::chrono::microseconds(700), kDefaults);
  const Issuer b = Instance("b_2", milli + std::chrono::microseconds(200), kCorp);
  const RecordedInstance a_recorded{.name = a.Name(), .started = milli, .settings = a.settings};
  const RecordedInstance b_recorded{.name = b.Name(), .started = milli, .settings = b.settings};
  EXPECT_NE(YieldsTo(a, b_recorded), YieldsTo(b, a_recorded));
}

TEST(EnsureSecretWithIssuers, TheStartIsRecordedToTheMillisecond) {
  FakeClock clock(TimePoint(std::chrono::milliseconds(1800000000042)));
  FakeClient client;
  MustEnsure(client, Spec(Instance("a_1", clock.Now(), kDefaults), "cluster.local"), clock);
  const std::string started = Annotation(Stored(client), kIssuerStartedAnnotation);
  EXPECT_EQ(started, "2027-01-15T08:00:00.042Z");
  auto parsed = ParseRfc3339(started);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, clock.Now());
}

TEST(EnsureSecretWithIssuers, EveryPairIssuedRecordsItsIssuer) {
  TwoInstances cluster;
  const Json made = Stored(cluster.client);
  EXPECT_EQ(Annotation(made, kIssuedByAnnotation), "certctl run hook-a_1");
  EXPECT_EQ(Annotation(made, kIssuerStartedAnnotation), "2027-01-15T08:00:00.000Z");
  EXPECT_EQ(ParseSettings(Annotation(made, kIssuedWithAnnotation)), kDefaults);
}

TEST(EnsureSecretWithIssuers, TheLaterInstanceIssuesOnceAndTheEarlierYieldsWithOneObjection) {
  TwoInstances cluster;
  const int writes_before = cluster.client.WriteCount();

  // The later instance re-issues for its names, once.
  SecretOutcome late = MustEnsure(cluster.client, cluster.late_spec, cluster.clock);
  EXPECT_EQ(late.action, SecretAction::kLeafReissued);
  EXPECT_FALSE(late.conflict);
  EXPECT_EQ(Annotation(Stored(cluster.client), kIssuedByAnnotation), "certctl run hook-b_2");
  const auto late_names = LeafNames(Stored(cluster.client));

  // The earlier one leaves that certificate as it is and objects, once.
  SecretOutcome early = MustEnsure(cluster.client, cluster.early_spec, cluster.clock);
  EXPECT_EQ(early.action, SecretAction::kNone);
  ASSERT_TRUE(early.conflict);
  EXPECT_TRUE(early.conflict->yielding);
  EXPECT_THAT(early.conflict->other, HasSubstr("certctl run hook-b_2"));
  EXPECT_THAT(early.conflict->differing,
              ElementsAre("key-type rsa-2048 (here: ecdsa-p256)",
                          "cluster-domain corp.local (here: cluster.local)",
                          "ca-name other-ca (here: default)"));
  EXPECT_EQ(early.tls_crt, late.tls_crt);  // it serves the later one's certificate
  const Json objected = Stored(cluster.client);
  EXPECT_EQ(Annotation(objected, kObjectedByAnnotation), "certctl run hook-a_1");
  EXPECT_EQ(LeafNames(objected), late_names);
  EXPECT_EQ(cluster.client.WriteCount(), writes_before + 2);

  // From then on neither writes, and both report the conflict.
  for (int pass = 0; pass < 3; ++pass) {
    SecretOutcome again_early = MustEnsure(cluster.client, cluster.early_spec, cluster.clock);
    SecretOutcome again_late = MustEnsure(cluster.client, cluster.late_spec, cluster.clock);
    EXPECT_EQ(again_early.conflict, early.conflict);
    ASSERT_TRUE(again_late.conflict);
    EXPECT_FALSE(again_late.conflict->yielding);
    EXPECT_THAT(again_late.conflict->other, HasSubstr("certctl run hook-a_1"));
    EXPECT_THAT(again_late.conflict->Describe(kObject),
                HasSubstr("key-type ecdsa-p256 (here: rsa-2048)"));
  }
  EXPECT_EQ(cluster.client.WriteCount(), writes_before + 2);
  EXPECT_THAT(RecordedConflict(Stored(cluster.client)).value_or(""),
              HasSubstr("certctl run hook-a_1 manages the same Secret"));
}

TEST(EnsureSecretWithIssuers, WhatExpiresIsRenewedWhoeverIssuedIt) {
  TwoInstances cluster;
  MustEnsure(cluster.client, cluster.late_spec, cluster.clock);
  MustEnsure(cluster.client, cluster.early_spec, cluster.clock);  // yields
  // Ten years on, within --renew-before: the earlier instance renews rather than wait.
  cluster.clock.Advance(std::chrono::hours(24 * (365 * 10 - 10)));
  SecretOutcome early = MustEnsure(cluster.client, cluster.early_spec, cluster.clock);
  EXPECT_NE(early.action, SecretAction::kNone);
  EXPECT_FALSE(early.conflict && early.conflict->yielding);
  EXPECT_EQ(Annotation(Stored(cluster.client), kIssuedByAnnotation), "certctl run hook-a_1");
  EXPECT_EQ(Annotation(Stored(cluster.client), kObjectedByAnnotation), "");
}

TEST(EnsureSecretWithIssuers, WhatNeedsARepairIsRepairedByTheInstanceThatFindsIt) {
  TwoInstances cluster;
  MustEnsure(cluster.client, cluster.late_spec, cluster.clock);
  MustEnsure(cluster.client, cluster.early_spec, cluster.clock);  // yields
  // A stray rotation phase (a hand edit): the earlier instance repairs the Secret rather than
  // leave it judged wrong, issuing for its own settings on the way.
  Json tampered = Stored(cluster.client);
  tampered["metadata"]["annotations"][kRotationPhaseAnnotation] = "trusting";
  cluster.client.Put(kSecrets, tampered);
  SecretOutcome early = MustEnsure(cluster.client, cluster.early_spec, cluster.clock);
  EXPECT_EQ(early.action, SecretAction::kLeafReissued);
  EXPECT_FALSE(early.conflict);
  EXPECT_EQ(Annotation(Stored(cluster.client), kRotationPhaseAnnotation), "");
  EXPECT_EQ(Annotation(Stored(cluster.client), kIssuedByAnnotation), "certctl run hook-a_1");
}

TEST(EnsureSecretWithIssuers, ARotationRequestMakesTheYieldingInstanceIssue) {
  TwoInstances cluster;
  MustEnsure(cluster.client, cluster.late_spec, cluster.clock);
  MustEnsure(cluster.client, cluster.early_spec, cluster.clock);
  auto requested = RequestRotation(cluster.client, kNs, kName, RotationRequest::kLeaf);
  ASSERT_TRUE(requested.has_value()) << requested.error().message();
  SecretOutcome early = MustEnsure(cluster.client, cluster.early_spec, cluster.clock);
  EXPECT_EQ(early.action, SecretAction::kLeafReissued);
  EXPECT_EQ(Annotation(Stored(cluster.client), kIssuedByAnnotation), "certctl run hook-a_1");
}

TEST(StepAside, TheLaterInstanceHandsOverAndTheEarlierIssuesForItself) {
  TwoInstances cluster;
  MustEnsure(cluster.client, cluster.late_spec, cluster.clock);
  MustEnsure(cluster.client, cluster.early_spec, cluster.clock);
  ASSERT_TRUE(StepAside(cluster.client, kNs, kName, cluster.late).has_value());
  EXPECT_EQ(Annotation(Stored(cluster.client), kIssuedByAnnotation), "");

  SecretOutcome early = MustEnsure(cluster.client, cluster.early_spec, cluster.clock);
  EXPECT_EQ(early.action, SecretAction::kLeafReissued);
  EXPECT_FALSE(early.conflict);
  const Json after = Stored(cluster.client);
  EXPECT_EQ(Annotation(after, kIssuedByAnnotation), "certctl run hook-a_1");
  EXPECT_EQ(Annotation(after, kObjectedByAnnotation), "");
  EXPECT_THAT(LeafNames(after), ::testing::Contains("svc.webhooks.svc.cluster.local"));
}

TEST(StepAside, TheEarlierInstanceWithdrawsItsObjection) {
  TwoInstances cluster;
  MustEnsure(cluster.client, cluster.late_spec, cluster.clock);
  MustEnsure(cluster.client, cluster.early_spec, cluster.clock);
  ASSERT_TRUE(StepAside(cluster.client, kNs, kName, cluster.early).has_value());
  EXPECT_EQ(Annotation(Stored(cluster.client), kObjectedByAnnotation), "");
  EXPECT_EQ(Annotation(Stored(cluster.client), kIssuedByAnnotation), "certctl run hook-b_2");
  EXPECT_FALSE(MustEnsure(cluster.client, cluster.late_spec, cluster.clock).conflict);
}

TEST(StepAside, ALoneInstanceWritesNothingWhenItStops) {
  TwoInstances cluster;
  const int writes = cluster.client.WriteCount();
  ASSERT_TRUE(StepAside(cluster.client, kNs, kName, cluster.early).has_value());
  EXPECT_EQ(cluster.client.WriteCount(), writes);
}

TEST(EnsureSecretWithIssuers, InstancesWithTheSameSettingsNeverYield) {
  // Different --service, same settings: names merge (WithNamesStillCalled), nobody objects.
  TwoInstances cluster;
  Issuer other = Instance("hook-c_3", cluster.clock.Now(), kDefaults);
  SecretSpec other_spec = Spec(other, "cluster.local");
  other_spec.identity.service = "svc2";
  SecretOutcome outcome = MustEnsure(cluster.client, other_spec, cluster.clock);
  EXPECT_EQ(outcome.action, SecretAction::kLeafReissued);
  SecretOutcome early = MustEnsure(cluster.client, cluster.early_spec, cluster.clock);
  EXPECT_FALSE(early.conflict);
  EXPECT_EQ(Annotation(Stored(cluster.client), kObjectedByAnnotation), "");
}

}  // namespace
}  // namespace issuer_test
}  // namespace certctl::controller
