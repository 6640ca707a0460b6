#include "certctl/fleet/reconcile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/controller/secret.h"
#include "certctl/controller/targets.h"
#include "certctl/pki/certificate.h"
#include "certctl/util/base64.h"

#include "fakes/fake_client.h"
#include "fakes/fake_clock.h"
#include "support/target_objects.h"
#include "support/test_pki.h"

namespace certctl::fleet {
namespace reconcile_test {
namespace {

using Json = nlohmann::json;
using certctl::testing::CaBuilder;
using certctl::testing::FakeClient;
using certctl::testing::FakeClock;
using certctl::testing::LeafBuilder;
using certctl::testing::SecretBuilder;
using certctl::testing::WebhookConfiguration;
using certctl::testing::WebhookEntry;
using inject::TargetKind;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kNs[] = "team-a";

CertificateRequest Asks(const std::string& service, const std::string& secret) {
  return {.ns = kNs, .service = service, .secret = secret, .dns_names = {}, .uid = "svc-uid"};
}

InjectionRequest Injects(const std::string& name, const std::string& secret,
                         const char* annotation = kInjectCaFromAnnotation) {
  return {.kind = TargetKind::kValidatingWebhookConfiguration,
          .name = name,
          .secret_ns = kNs,
          .secret = secret,
          .annotation = annotation,
          .fail_once_ready = false,
          .uid = name + "-uid"};
}

// A configuration whose one entry calls `service` in kNs.
Json Configuration(const std::string& name, const std::string& service) {
  return WebhookConfiguration(name, {WebhookEntry("a.example.com", kNs).Service(kNs, service)});
}

std::string BundleOf(const FakeClient& client, const std::string& name) {
  auto object = client.Object(kube::kValidatingWebhookConfigurations, "", name);
  if (!object) {
    return "";
  }
  const Json::json_pointer field("/webhooks/0/clientConfig/caBundle");
  if (!object->contains(field)) {
    return "";
  }
  return Base64Decode((*object)[field].get<std::string>()).value_or("");
}

std::string SecretCa(const FakeClient& client, const std::string& name) {
  auto secret = client.Object(kube::kSecrets, kNs, name);
  return secret ? Base64Decode((*secret)["data"]["ca.crt"].get<std::string>()).value_or("") : "";
}

SecretReconcile MustReconcile(FakeClient& client, const AnnotationIndex& index,
                              const std::string& secret, const FakeClock& clock) {
  auto result = ReconcileSecret(client, index.RequestsFor(secret), IssueSettings{}, clock);
  EXPECT_TRUE(result.has_value()) << result.error().message();
  return result.value_or(SecretReconcile{});
}

TEST(ReconcileSecret, AServicesSecretIsIssuedAndInjectedThenLeftAlone) {
  FakeClock clock;
  FakeClient client;
  client.Put(kube::kValidatingWebhookConfigurations, Configuration("policy", "hook"));
  AnnotationIndex index;
  index.SetService("team-a/hook", Asks("hook", "hook-tls"));
  index.SetTarget("validatingwebhookconfiguration/policy", Injects("policy", "hook-tls"));

  SecretReconcile first = MustReconcile(client, index, "team-a/hook-tls", clock);
  ASSERT_TRUE(first.pass);
  EXPECT_TRUE(first.pass->ready && first.pass->injected) << first.pass->not_ready;
  EXPECT_THAT(first.problems, IsEmpty());
  const std::string ca = SecretCa(client, "hook-tls");
  ASSERT_FALSE(ca.empty());
  EXPECT_EQ(BundleOf(client, "policy"), ca);
  auto secret = client.Object(kube::kSecrets, kNs, "hook-tls");
  EXPECT_EQ((*secret)["metadata"]["labels"][kServingCertForLabel], "hook");
  auto leaf = pki::Certificate::FromPem(
      Base64Decode((*secret)["data"]["tls.crt"].get<std::string>()).value_or(""));
  ASSERT_TRUE(leaf.has_value());
  EXPECT_THAT(leaf->Info().dns_names, ElementsAre("hook.team-a.svc", "hook", "hook.team-a",
                                                  "hook.team-a.svc.cluster.local"));
  EXPECT_THAT(pki::Certificate::FromPem(ca)->Info().subject, HasSubstr("hook-ca"));

  const int writes = client.WriteCount();
  MustReconcile(client, index, "team-a/hook-tls", clock);
  EXPECT_EQ(client.WriteCount(), writes);  // a steady Secret and target: zero writes
}

TEST(ReconcileSecret, ASecretNoAnnotationNamesIsNeverRead) {
  FakeClock clock;
  FakeClient client;
  AnnotationIndex index;
  index.SetService("team-a/hook", Asks("hook", "hook-tls"));
  SecretReconcile result = MustReconcile(client, index, "team-a/someone-elses", clock);
  EXPECT_FALSE(result.pass);
  EXPECT_EQ(client.ReadCount(), 0);
  EXPECT_EQ(client.WriteCount(), 0);
}

TEST(ReconcileSecret, ASecretOnlyInjectedFromIsReadNeverWritten) {
  FakeClock clock;
  FakeClient client;
  const pki::KeyPair ca = CaBuilder("their-ca").At(clock.Now()).Build();
  const pki::KeyPair leaf = LeafBuilder(ca).At(clock.Now()).DnsNames({"hook.team-a.svc"}).Build();
  client.Put(kube::kSecrets, SecretBuilder(kNs, "theirs").Pair(ca, leaf).Labels(Json::object()));
  client.Put(kube::kValidatingWebhookConfigurations, Configuration("policy", "hook"));
  AnnotationIndex index;
  index.SetTarget("validatingwebhookconfiguration/policy", Injects("policy", "theirs"));

  SecretReconcile result = MustReconcile(client, index, "team-a/theirs", clock);
  ASSERT_TRUE(result.injected);
  EXPECT_EQ(result.injected->patched_objects, 1);
  EXPECT_EQ(BundleOf(client, "policy"), ca.certificate.ToPem());
  EXPECT_EQ(client.CountOf(certctl::testing::Verb::kUpdate, kube::kSecrets), 0);
  EXPECT_EQ(client.CountOf(certctl::testing::Verb::kCreate, kube::kSecrets), 0);
}

TEST(ReconcileSecret, AMissingSourceIsToldOnTheTargetAndNothingIsCreated) {
  FakeClock clock;
  FakeClient client;
  client.Put(kube::kValidatingWebhookConfigurations, Configuration("policy", "hook"));
  AnnotationIndex index;
  index.SetTarget("validatingwebhookconfiguration/policy", Injects("policy", "absent"));
  SecretReconcile result = MustReconcile(client, index, "team-a/absent", clock);
  ASSERT_EQ(result.problems.size(), 1U);
  EXPECT_EQ(result.problems[0].reason, "InjectionSourceMissing");
  EXPECT_EQ(result.problems[0].about.name, "policy");
  EXPECT_EQ(result.problems[0].about.uid, "policy-uid");
  EXPECT_THAT(result.problems[0].message, HasSubstr("secret/team-a/absent, which does not exist"));
  EXPECT_EQ(client.WriteCount(), 0);
}

TEST(ReconcileSecret, CertManagersAnnotationNeedsTheSecretToAllowDirectInjection) {
  FakeClock clock;
  FakeClient client;
  const pki::KeyPair ca = CaBuilder("cm-ca").At(clock.Now()).Build();
  const pki::KeyPair leaf = LeafBuilder(ca).At(clock.Now()).DnsNames({"hook.team-a.svc"}).Build();
  Json secret = SecretBuilder(kNs, "cm").Pair(ca, leaf).Labels(Json::object());
  client.Put(kube::kSecrets, secret);
  client.Put(kube::kValidatingWebhookConfigurations, Configuration("policy", "hook"));
  AnnotationIndex index;
  index.SetTarget("validatingwebhookconfiguration/policy",
                  Injects("policy", "cm", kCertManagerInjectCaFromSecretAnnotation));

  SecretReconcile refused = MustReconcile(client, index, "team-a/cm", clock);
  ASSERT_EQ(refused.problems.size(), 1U);
  EXPECT_EQ(refused.problems[0].reason, "DirectInjectionNotAllowed");
  EXPECT_EQ(BundleOf(client, "policy"), "");

  secret["metadata"]["annotations"][kAllowDirectInjectionAnnotation] = "true";
  client.Put(kube::kSecrets, secret);
  SecretReconcile allowed = MustReconcile(client, index, "team-a/cm", clock);
  EXPECT_THAT(allowed.problems, IsEmpty());
  EXPECT_EQ(BundleOf(client, "policy"), ca.certificate.ToPem());
}

TEST(ReconcileSecret, AnExistingSecretCertctlDoesNotManageIsNeverOverwritten) {
  FakeClock clock;
  FakeClient client;
  const pki::KeyPair ca = CaBuilder("their-ca").At(clock.Now()).Build();
  const pki::KeyPair leaf = LeafBuilder(ca).At(clock.Now()).DnsNames({"other.example"}).Build();
  const Json theirs = client.Put(
      kube::kSecrets, SecretBuilder(kNs, "hook-tls").Pair(ca, leaf).Labels(Json::object()));
  AnnotationIndex index;
  index.SetService("team-a/hook", Asks("hook", "hook-tls"));
  SecretReconcile result = MustReconcile(client, index, "team-a/hook-tls", clock);
  ASSERT_EQ(result.problems.size(), 1U);
  EXPECT_EQ(result.problems[0].reason, "SecretNotManaged");
  EXPECT_EQ(result.problems[0].about.kind, "Service");
  EXPECT_EQ(result.problems[0].about.uid, "svc-uid");
  EXPECT_EQ(client.Object(kube::kSecrets, kNs, "hook-tls")->at("data"), theirs.at("data"));
}

TEST(ReconcileSecret, AServiceOutnumberedForASecretIsTold) {
  FakeClock clock;
  FakeClient client;
  AnnotationIndex index;
  index.SetService("team-a/alpha", Asks("alpha", "shared"));
  index.SetService("team-a/zeta", Asks("zeta", "shared"));
  SecretReconcile result = MustReconcile(client, index, "team-a/shared", clock);
  ASSERT_EQ(result.problems.size(), 1U);
  EXPECT_EQ(result.problems[0].reason, "SecretClaimed");
  EXPECT_EQ(result.problems[0].about.name, "zeta");
  EXPECT_THAT(result.problems[0].message, HasSubstr("service/team-a/alpha already asks for"));
  ASSERT_TRUE(result.pass);  // alpha's Secret is issued all the same
}

TEST(SpecFor, TheServicesNamesTheAnnotatedOnesAndTheControllersSettings) {
  IssueSettings settings;
  settings.key_type = pki::KeyType::kRsa2048;
  settings.cluster_domain = "corp.local";
  CertificateRequest request = Asks("hook", "hook-tls");
  request.dns_names = {"hook.example.com", "10.1.2.3"};
  const controller::SecretSpec spec = SpecFor(request, settings);
  EXPECT_EQ(spec.ns, kNs);
  EXPECT_EQ(spec.name, "hook-tls");
  EXPECT_EQ(spec.identity.cluster_domain, "corp.local");
  EXPECT_THAT(spec.identity.extra_dns_names, ElementsAre("hook.example.com"));
  EXPECT_THAT(spec.identity.ip_addresses, ElementsAre("10.1.2.3"));
  EXPECT_EQ(spec.ca.common_name, "hook-ca");
  EXPECT_EQ(spec.leaf_key_type, pki::KeyType::kRsa2048);
  EXPECT_EQ(spec.ca.key_type, pki::KeyType::kRsa2048);
}

}  // namespace
}  // namespace reconcile_test
}  // namespace certctl::fleet
