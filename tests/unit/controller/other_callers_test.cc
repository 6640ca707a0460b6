#include "certctl/controller/other_callers.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/controller/ensure_secret.h"
#include "certctl/util/base64.h"

#include "fakes/fake_client.h"
#include "fakes/fake_clock.h"
#include "support/target_objects.h"
#include "support/test_pki.h"

namespace certctl::controller {
namespace other_callers_test {
namespace {

using Json = nlohmann::json;
using certctl::testing::CaBuilder;
using certctl::testing::FakeClient;
using certctl::testing::FakeClock;
using certctl::testing::Verb;
using certctl::testing::WebhookConfiguration;
using certctl::testing::WebhookEntry;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kNs[] = "demo";
constexpr char kDropped[] = "hook-a.demo.svc";

// The Secret's CA and another one, as PEM.
struct Cas {
  std::string secret = CaBuilder("secret-ca").Build().certificate.ToPem();
  std::string other = CaBuilder("other-ca").Build().certificate.ToPem();
};

// A configuration whose one entry calls Service hook-a in demo trusting `bundle`.
Json CallingHookA(const std::string& name, const std::string& bundle) {
  return WebhookConfiguration(
      name, {WebhookEntry("v.demo.io", kNs).Service(kNs, "hook-a").Bundle(bundle)});
}

OtherCallersLook Find(FakeClient& client, const TargetSelection& targets, const std::string& ca) {
  return FindOtherCallers(client, targets, {kDropped, "hook-a", "hook-a.demo"}, ca);
}

TEST(FindOtherCallers, AnEntryOutsideTheTargetsCallingADroppedNameWithTheSecretsCaIsFound) {
  const Cas cas;
  FakeClient client;
  client.Put(kube::kValidatingWebhookConfigurations, CallingHookA("demo-webhook", cas.secret));
  client.Put(kube::kMutatingWebhookConfigurations, CallingHookA("demo-mutator", cas.secret));
  TargetSelection targets;
  targets.validating_webhooks = {"hook-b"};

  const OtherCallersLook look = Find(client, targets, cas.secret);

  EXPECT_FALSE(look.not_looked);
  ASSERT_EQ(look.found.size(), 2u);
  EXPECT_EQ(look.found[0].Describe(),
            "validatingwebhookconfiguration/demo-webhook webhooks[0] (v.demo.io) calls "
            "hook-a.demo.svc");
  EXPECT_EQ(look.found[1].object, "mutatingwebhookconfiguration/demo-mutator");
  // One LIST of each kind, nothing else.
  EXPECT_EQ(client.ReadCount(), 2);
  EXPECT_EQ(client.CountOf(Verb::kList, kube::kValidatingWebhookConfigurations), 1);
  EXPECT_EQ(client.CountOf(Verb::kList, kube::kMutatingWebhookConfigurations), 1);
}

TEST(FindOtherCallers, AnEntryTrustingAnotherCaIsNotServedByThisSecret) {
  const Cas cas;
  FakeClient client;
  client.Put(kube::kValidatingWebhookConfigurations, CallingHookA("demo-webhook", cas.other));
  client.Put(kube::kValidatingWebhookConfigurations, CallingHookA("no-bundle", ""));

  const OtherCallersLook look = Find(client, {}, cas.secret);

  EXPECT_FALSE(look.not_looked);
  EXPECT_THAT(look.found, IsEmpty());
}

TEST(FindOtherCallers, TheTargetsEntriesNeverCount) {
  const Cas cas;
  FakeClient client;
  client.Put(kube::kValidatingWebhookConfigurations, CallingHookA("named", cas.secret));
  Json selected = CallingHookA("selected", cas.secret);
  selected["metadata"]["labels"] = {{"example.com/ca-bundle", "certctl"}};
  client.Put(kube::kMutatingWebhookConfigurations, selected);
  client.Put(kube::kMutatingWebhookConfigurations, CallingHookA("other", cas.secret));
  TargetSelection targets;
  targets.validating_webhooks = {"named"};
  targets.webhook_selector = "example.com/ca-bundle=certctl";

  const OtherCallersLook look = Find(client, targets, cas.secret);

  EXPECT_FALSE(look.not_looked);
  ASSERT_EQ(look.found.size(), 1u);
  EXPECT_EQ(look.found[0].object, "mutatingwebhookconfiguration/other");
}

TEST(FindOtherCallers, EntriesCallingAUrlAreIgnored) {
  const Cas cas;
  FakeClient client;
  client.Put(kube::kValidatingWebhookConfigurations,
             WebhookConfiguration("by-url", {WebhookEntry("u.demo.io", kNs)
                                                 .Url("https://hook-a.demo.svc/validate")
                                                 .Bundle(cas.secret)}));

  EXPECT_THAT(Find(client, {}, cas.secret).found, IsEmpty());
}

TEST(FindOtherCallers, AnEntryCallingANameThatStaysIsNotFound) {
  const Cas cas;
  FakeClient client;
  client.Put(
      kube::kValidatingWebhookConfigurations,
      WebhookConfiguration(
          "hook-b", {WebhookEntry("b.demo.io", kNs).Service(kNs, "hook-b").Bundle(cas.secret)}));

  EXPECT_THAT(Find(client, {}, cas.secret).found, IsEmpty());
}

TEST(FindOtherCallers, AForbiddenListIsNotLookedAndNoFailure) {
  const Cas cas;
  FakeClient client;
  client.Put(kube::kValidatingWebhookConfigurations, CallingHookA("demo-webhook", cas.secret));
  client.InjectFailure(Verb::kList, kube::kValidatingWebhookConfigurations,
                       Error(ErrorCode::kPermissionDenied,
                             "validatingwebhookconfigurations is "
                             "forbidden"));

  const OtherCallersLook look = Find(client, {}, cas.secret);

  ASSERT_TRUE(look.not_looked);
  EXPECT_EQ(look.not_looked->code(), ErrorCode::kPermissionDenied);
  EXPECT_THAT(look.not_looked->message(), HasSubstr("forbidden"));
  EXPECT_THAT(look.found, IsEmpty());
  EXPECT_EQ(client.ReadCount(), 1);  // tried once, not again
}

TEST(FindOtherCallers, TheSelectorsConfigurationsAreTheTargetsToo) {
  const Cas cas;
  FakeClient client;
  Json selected = CallingHookA("selected-webhook", cas.secret);
  selected["metadata"]["labels"] = {{"certctl.io/inject", "true"}};
  client.Put(kube::kValidatingWebhookConfigurations, selected);
  client.Put(kube::kValidatingWebhookConfigurations, CallingHookA("demo-webhook", cas.secret));
  TargetSelection targets;
  targets.webhook_selector = "certctl.io/inject=true";

  const OtherCallersLook look = Find(client, targets, cas.secret);

  ASSERT_FALSE(look.not_looked) << look.not_looked->message();
  ASSERT_EQ(look.found.size(), 1U);
  EXPECT_EQ(look.found[0].object, "validatingwebhookconfiguration/demo-webhook");
}

TEST(OtherCallerNotices, TheWarningNamesTheSecretTheEntryAndTheDroppedName) {
  const OtherCaller caller{"validatingwebhookconfiguration/demo-webhook", "webhooks[0]",
                           "v.demo.io", "hook-a.demo.svc"};
  EXPECT_EQ(BrokenCallerWarning(caller, "secret/demo/webhook-server-cert"),
            "the server certificate in secret/demo/webhook-server-cert no longer names "
            "hook-a.demo.svc, which validatingwebhookconfiguration/demo-webhook webhooks[0] "
            "(v.demo.io) calls with this Secret's CA in its caBundle: that webhook's calls now "
            "fail the API server's TLS check (give it a Secret of its own)");
}

TEST(OtherCallerNotices, AForbiddenLookIsOnlyRefusedAndAnyOtherFailureIsNot) {
  const auto refused = NoticeOfNotLooked(Error(ErrorCode::kPermissionDenied, "forbidden"),
                                         "secret/demo/webhook-server-cert");
  EXPECT_TRUE(refused.refused);
  EXPECT_THAT(refused.line, HasSubstr("secret/demo/webhook-server-cert dropped names"));
  EXPECT_THAT(refused.line, HasSubstr("could not be looked for: forbidden"));
  EXPECT_FALSE(
      NoticeOfNotLooked(Error(ErrorCode::kUnavailable, "connection refused"), "s").refused);
}

// --- EnsureSecret asks only when a new leaf drops names --------------------------------------

SecretSpec Spec(const std::string& service) {
  SecretSpec spec;
  spec.ns = kNs;
  spec.name = "webhook-server-cert";
  spec.identity.service = service;
  spec.identity.namespace_name = kNs;
  spec.ca.common_name = "demo-ca";
  return spec;
}

// A Secret made for hook-a, and a configuration outside the targets calling hook-a with its CA.
struct SharedSecret {
  SharedSecret() {
    auto created = EnsureSecret(client, Spec("hook-a"), clock);
    EXPECT_TRUE(created.has_value()) << created.error().message();
    client.Put(kube::kValidatingWebhookConfigurations,
               CallingHookA("demo-webhook", created->ca_bundle));
    before = client.Object(kube::kSecrets, kNs, "webhook-server-cert").value();
    client.ClearRequests();
  }

  Result<SecretOutcome> Ensure(const SecretSpec& spec) {
    return EnsureSecret(client, spec, clock, {}, {}, {},
                        [this](const std::vector<std::string>& dropped, const std::string& ca) {
                          ++looks;
                          return FindOtherCallers(client, {}, dropped, ca);
                        });
  }

  FakeClock clock;
  FakeClient client;
  Json before;
  int looks = 0;
};

TEST(EnsureSecret, RefusesALeafThatBreaksAnotherCallerAndWritesNothing) {
  SharedSecret cluster;
  SecretSpec spec = Spec("hook-b");
  spec.refuse_to_break_other_callers = true;

  auto outcome = cluster.Ensure(spec);

  ASSERT_FALSE(outcome.has_value());
  EXPECT_EQ(outcome.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_THAT(outcome.error().message(),
              HasSubstr("would drop hook-a.demo.svc, which webhook configurations that are not "
                        "targets call"));
  EXPECT_THAT(outcome.error().message(),
              HasSubstr("validatingwebhookconfiguration/demo-webhook webhooks[0] (v.demo.io)"));
  EXPECT_THAT(outcome.error().message(), HasSubstr("--force-reissue"));
  EXPECT_EQ(cluster.client.WriteCount(), 0);
  EXPECT_EQ(cluster.client.Object(kube::kSecrets, kNs, "webhook-server-cert"), cluster.before);
}

TEST(EnsureSecret, WithoutRefusalReissuesAndTellsTheOtherCallers) {
  SharedSecret cluster;

  auto outcome = cluster.Ensure(Spec("hook-b"));

  ASSERT_TRUE(outcome.has_value()) << outcome.error().message();
  EXPECT_EQ(outcome->action, SecretAction::kLeafReissued);
  ASSERT_EQ(outcome->other_callers.found.size(), 1u);
  EXPECT_EQ(outcome->other_callers.found[0].host, kDropped);
  EXPECT_EQ(cluster.client.WriteCount(), 1);
}

TEST(EnsureSecret, AForbiddenLookForOtherCallersDoesNotHoldTheLeafBack) {
  SharedSecret cluster;
  cluster.client.InjectFailure(Verb::kList, kube::kValidatingWebhookConfigurations,
                               Error(ErrorCode::kPermissionDenied, "forbidden"));
  SecretSpec spec = Spec("hook-b");
  spec.refuse_to_break_other_callers = true;

  auto outcome = cluster.Ensure(spec);

  ASSERT_TRUE(outcome.has_value()) << outcome.error().message();
  EXPECT_EQ(outcome->action, SecretAction::kLeafReissued);
  ASSERT_TRUE(outcome->other_callers.not_looked);
  EXPECT_EQ(outcome->other_callers.not_looked->code(), ErrorCode::kPermissionDenied);
}

TEST(EnsureSecret, LooksForOtherCallersOnlyWhenALeafDropsNames) {
  SharedSecret cluster;
  SecretSpec spec = Spec("hook-a");
  spec.refuse_to_break_other_callers = true;
  EXPECT_EQ(cluster.Ensure(spec)->action, SecretAction::kNone);
  spec.identity.extra_dns_names = {"hook.example.com"};  // added, none dropped
  EXPECT_EQ(cluster.Ensure(spec)->action, SecretAction::kLeafReissued);

  EXPECT_EQ(cluster.looks, 0);
  EXPECT_EQ(cluster.client.CountOf(Verb::kList, kube::kValidatingWebhookConfigurations), 0);
}

}  // namespace
}  // namespace other_callers_test
}  // namespace certctl::controller
