#include "certctl/controller/check.h"

#include <chrono>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/controller/rotation.h"
#include "certctl/controller/secret.h"
#include "certctl/pki/certificate.h"
#include "certctl/pki/issue.h"
#include "certctl/util/base64.h"

#include "fakes/fake_client.h"
#include "fakes/fake_clock.h"
#include "support/target_objects.h"
#include "support/test_pki.h"

namespace certctl::controller {
namespace check_test {
namespace {

using Json = nlohmann::json;
using certctl::testing::BundlePem;
using certctl::testing::CaBuilder;
using certctl::testing::ConversionCrd;
using certctl::testing::FakeClient;
using certctl::testing::FakeClock;
using certctl::testing::LeafBuilder;
using certctl::testing::SecretBuilder;
using certctl::testing::Verb;
using certctl::testing::WebhookConfiguration;
using certctl::testing::WebhookEntry;
using kube::kApiServices;
using kube::kCustomResourceDefinitions;
using kube::kMutatingWebhookConfigurations;
using kube::kSecrets;
using kube::kValidatingWebhookConfigurations;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

constexpr char kNs[] = "webhooks";
constexpr char kSecretName[] = "webhook-server-cert";
constexpr char kSecretObject[] = "secret/webhooks/webhook-server-cert";
constexpr std::chrono::hours kDay{24};

const FakeClock kClock;

pki::KeyPair MustCa(const std::string& name, TimePoint now = kClock.Now()) {
  return CaBuilder(name).At(now).Build();
}

pki::KeyPair MustLeaf(const pki::KeyPair& ca) {
  return LeafBuilder(ca)
      .At(kClock.Now())
      .DnsNames({"svc.webhooks.svc", "svc"})
      .Validity(180 * kDay)
      .Build();
}

// A kubernetes.io/tls Secret: ca.crt holds `bundle`, the rest `ca` and `leaf`.
Json TlsSecret(const std::vector<const pki::KeyPair*>& bundle, const pki::KeyPair& ca,
               const pki::KeyPair& leaf) {
  return SecretBuilder(kNs, kSecretName).Pair(bundle, ca, leaf);
}

// A caBundle field value: base64 of the PEM text.
std::string Encoded(const std::vector<const pki::KeyPair*>& cas) {
  return Base64Encode(BundlePem(cas));
}

Json Webhook(const std::string& name, const std::string& ca_bundle) {
  return WebhookEntry(name, kNs).RawBundle(ca_bundle);
}

Json Crd(const std::string& name, const std::string& ca_bundle) {
  return ConversionCrd(
      name, {{"service", {{"namespace", kNs}, {"name", "svc"}}}, {"caBundle", ca_bundle}});
}

Json ApiService(const std::string& name, const std::string& ca_bundle) {
  Json api_service = certctl::testing::ApiService(name, {{"namespace", kNs}, {"name", "svc"}});
  api_service["spec"]["caBundle"] = ca_bundle;
  return api_service;
}

pki::ValidationPolicy Policy() {
  pki::ValidationPolicy policy;
  policy.dns_names = {"svc.webhooks.svc"};
  return policy;
}

auto IsFinding(FindingCode code, const std::string& object) {
  return AllOf(Field(&Finding::code, code), Field(&Finding::object, object));
}

auto IsStatus(const std::string& kind, const std::string& name, const std::string& webhook,
              bool ok) {
  return AllOf(Field(&TargetStatus::kind, kind), Field(&TargetStatus::name, name),
               Field(&TargetStatus::webhook, webhook), Field(&TargetStatus::ok, ok));
}

// A cluster holding a valid Secret issued by `ca`.
struct Cluster {
  Cluster() : ca(MustCa("webhook-ca")), leaf(MustLeaf(ca)) {
    client.Put(kSecrets, TlsSecret({&ca}, ca, leaf));
  }

  // CheckSecret then CheckTargets, as `certctl check` runs them; both must run.
  CheckReport Check(const TargetSelection& selection) {
    auto report = CheckSecret(client, kNs, kSecretName, Policy(), kClock.Now());
    EXPECT_TRUE(report.has_value()) << report.error().message();
    if (!report) {
      return {};
    }
    auto status = CheckTargets(client, selection, *report);
    EXPECT_TRUE(status.has_value()) << status.error().message();
    return *report;
  }

  FakeClient client;
  pki::KeyPair ca;
  pki::KeyPair leaf;
};

TargetSelection Validating(const std::string& name) {
  TargetSelection selection;
  selection.validating_webhooks = {name};
  return selection;
}

TEST(CheckSecret, HealthySecretHasNoFindings) {
  Cluster cluster;
  auto report = CheckSecret(cluster.client, kNs, kSecretName, Policy(), kClock.Now());
  ASSERT_TRUE(report.has_value()) << report.error().message();
  EXPECT_EQ(report->source, "secret webhooks/webhook-server-cert");
  EXPECT_THAT(report->AllFindings(), IsEmpty());
  EXPECT_TRUE(report->ok());
  ASSERT_EQ(report->validation.ca.size(), 1u);
  EXPECT_EQ(report->validation.ca[0].sha256_fingerprint,
            cluster.ca.certificate.Info().sha256_fingerprint);
  EXPECT_EQ(cluster.client.CountOf(Verb::kGet, kSecrets, kSecretName), 1);
  EXPECT_EQ(cluster.client.ReadCount(), 1);
  EXPECT_EQ(cluster.client.WriteCount(), 0);
}

TEST(CheckSecret, RotationAnnotationsCertctlWouldIgnoreAreARotationStateInvalidFinding) {
  for (const char* phase : {"trusting", "stage-7"}) {
    SCOPED_TRACE(phase);
    Cluster cluster;
    Json secret = TlsSecret({&cluster.ca}, cluster.ca, cluster.leaf);
    secret["metadata"]["annotations"][kRotationPhaseAnnotation] = phase;
    cluster.client.Put(kSecrets, secret);
    auto report = CheckSecret(cluster.client, kNs, kSecretName, Policy(), kClock.Now());
    ASSERT_TRUE(report.has_value()) << report.error().message();
    EXPECT_THAT(report->AllFindings(),
                ElementsAre(AllOf(IsFinding(FindingCode::kRotationStateInvalid, kSecretObject),
                                  Field(&Finding::message, HasSubstr(kRotationPhaseAnnotation)))));
    EXPECT_FALSE(report->ok());
    EXPECT_EQ(cluster.client.WriteCount(), 0);
  }
}

TEST(CheckSecret, MissingSecretIsAMissingFinding) {
  FakeClient client;
  auto report = CheckSecret(client, kNs, kSecretName, Policy(), kClock.Now());
  ASSERT_TRUE(report.has_value()) << report.error().message();
  EXPECT_FALSE(report->ok());
  EXPECT_THAT(report->AllFindings(), ElementsAre(IsFinding(FindingCode::kMissing, kSecretObject)));
  EXPECT_EQ(client.WriteCount(), 0);
}

TEST(CheckSecret, ValidatesAtTheGivenTime) {
  Cluster cluster;
  auto report = CheckSecret(cluster.client, kNs, kSecretName, Policy(), kClock.Now() + 400 * kDay);
  ASSERT_TRUE(report.has_value()) << report.error().message();
  EXPECT_THAT(report->AllFindings(),
              Contains(IsFinding(FindingCode::kExpired, std::string(kSecretObject) + "[ca.crt]")));
  EXPECT_THAT(report->AllFindings(),
              Contains(IsFinding(FindingCode::kExpired, std::string(kSecretObject) + "[tls.crt]")));
}

TEST(CheckSecret, ReportsWrongTypeAndValidationFindingsTogether) {
  Cluster cluster;
  Json secret = TlsSecret({&cluster.ca}, cluster.ca, cluster.leaf);
  secret["type"] = "Opaque";
  secret["data"].erase("tls.key");
  cluster.client.Put(kSecrets, secret);
  pki::ValidationPolicy policy = Policy();
  policy.dns_names.push_back("other.webhooks.svc");
  auto report = CheckSecret(cluster.client, kNs, kSecretName, policy, kClock.Now());
  ASSERT_TRUE(report.has_value()) << report.error().message();
  const std::vector<Finding> findings = report->AllFindings();
  EXPECT_THAT(findings, Contains(IsFinding(FindingCode::kWrongType, kSecretObject)));
  EXPECT_THAT(findings,
              Contains(IsFinding(FindingCode::kMissing, std::string(kSecretObject) + "[tls.key]")));
  EXPECT_THAT(findings, Contains(IsFinding(FindingCode::kSanMissing,
                                           std::string(kSecretObject) + "[tls.crt]")));
}

TEST(CheckSecret, AnUnknownRotationPhaseOnAManagedSecretIsAFindingNamingTheAnnotation) {
  Cluster cluster;
  Json secret = TlsSecret({&cluster.ca}, cluster.ca, cluster.leaf);
  secret["metadata"]["annotations"] = {{kRotationPhaseAnnotation, "halfway"}};
  cluster.client.Put(kSecrets, secret);
  auto report = CheckSecret(cluster.client, kNs, kSecretName, Policy(), kClock.Now());
  ASSERT_TRUE(report.has_value()) << report.error().message();
  EXPECT_THAT(report->AllFindings(),
              ElementsAre(AllOf(IsFinding(FindingCode::kRotationStateInvalid, kSecretObject),
                                Field(&Finding::message, AllOf(HasSubstr(kRotationPhaseAnnotation),
                                                               HasSubstr("halfway"))))));
}

TEST(CheckSecret, RotationAnnotationsOnAnUnmanagedSecretAreNotCertctls) {
  Cluster cluster;
  Json secret = TlsSecret({&cluster.ca}, cluster.ca, cluster.leaf);
  secret["metadata"].erase("labels");
  secret["metadata"]["annotations"] = {{kRotationPhaseAnnotation, "halfway"},
                                       {kRotateAnnotation, "soon"}};
  cluster.client.Put(kSecrets, secret);
  auto report = CheckSecret(cluster.client, kNs, kSecretName, Policy(), kClock.Now());
  ASSERT_TRUE(report.has_value()) << report.error().message();
  EXPECT_TRUE(report->ok());
  auto stored =
      ReadStoredSecret(cluster.client, kNs, kSecretName, Policy(), kDefaultCaOverlap, kClock.Now());
  ASSERT_TRUE(stored.has_value()) << stored.error().message();
  ASSERT_TRUE(stored->has_value());
  EXPECT_EQ((*stored)->rotation.phase, RotationPhase::kNone);
  EXPECT_EQ((*stored)->rotation.requested, RotationRequest::kNone);
}

TEST(CheckSecret, ForbiddenGetIsAnErrorWithContext) {
  Cluster cluster;
  cluster.client.InjectFailure(
      Verb::kGet, kSecrets,
      Error(ErrorCode::kPermissionDenied,
            "secrets \"webhook-server-cert\" is forbidden: User \"x\" cannot get resource"));
  auto report = CheckSecret(cluster.client, kNs, kSecretName, Policy(), kClock.Now());
  ASSERT_FALSE(report.has_value());
  EXPECT_EQ(report.error().code(), ErrorCode::kPermissionDenied);
  EXPECT_THAT(
      report.error().message(),
      AllOf(StartsWith("get secret/webhooks/webhook-server-cert: "), HasSubstr("forbidden")));
}

TEST(CheckSecret, UnavailableApiIsAnErrorKeepingRetryAfter) {
  Cluster cluster;
  cluster.client.InjectFailure(
      Verb::kGet, kSecrets,
      Error(ErrorCode::kUnavailable, "the server is currently unable to handle the request")
          .set_retry_after(std::chrono::seconds(5)));
  auto report = CheckSecret(cluster.client, kNs, kSecretName, Policy(), kClock.Now());
  ASSERT_FALSE(report.has_value());
  EXPECT_EQ(report.error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(report.error().message(), StartsWith("get secret/webhooks/webhook-server-cert: "));
  EXPECT_EQ(report.error().retry_after(), std::chrono::seconds(5));
}

TEST(CheckTargets, EveryKindHoldingTheCaIsOkWithOneGetEachAndNoWrites) {
  Cluster cluster;
  const std::string bundle = Encoded({&cluster.ca});
  cluster.client.Put(
      kValidatingWebhookConfigurations,
      WebhookConfiguration("x", {Webhook("a.example.com", bundle), Webhook("b.example.com", bundle),
                                 Webhook("c.example.com", bundle)}));
  cluster.client.Put(kMutatingWebhookConfigurations,
                     WebhookConfiguration("m", {Webhook("mutate.example.com", bundle)}));
  cluster.client.Put(kCustomResourceDefinitions, Crd("widgets.example.com", bundle));
  cluster.client.Put(kApiServices, ApiService("v1beta1.metrics.example.com", bundle));
  cluster.client.ClearRequests();

  TargetSelection selection;
  selection.validating_webhooks = {"x"};
  selection.mutating_webhooks = {"m"};
  selection.crds = {"widgets.example.com"};
  selection.api_services = {"v1beta1.metrics.example.com"};
  const CheckReport report = cluster.Check(selection);

  EXPECT_THAT(report.AllFindings(), IsEmpty());
  EXPECT_TRUE(report.ok());
  EXPECT_THAT(report.targets,
              ElementsAre(IsStatus("ValidatingWebhookConfiguration", "x", "a.example.com", true),
                          IsStatus("ValidatingWebhookConfiguration", "x", "b.example.com", true),
                          IsStatus("ValidatingWebhookConfiguration", "x", "c.example.com", true),
                          IsStatus("MutatingWebhookConfiguration", "m", "mutate.example.com", true),
                          IsStatus("CustomResourceDefinition", "widgets.example.com", "", true),
                          IsStatus("APIService", "v1beta1.metrics.example.com", "", true)));
  EXPECT_EQ(cluster.client.WriteCount(), 0);
  EXPECT_EQ(cluster.client.ReadCount(), 5);
  EXPECT_EQ(cluster.client.CountOf(Verb::kGet, kSecrets, kSecretName), 1);
  EXPECT_EQ(cluster.client.CountOf(Verb::kGet, kValidatingWebhookConfigurations, "x"), 1);
  EXPECT_EQ(cluster.client.CountOf(Verb::kGet, kMutatingWebhookConfigurations, "m"), 1);
  EXPECT_EQ(cluster.client.CountOf(Verb::kGet, kCustomResourceDefinitions, "widgets.example.com"),
            1);
  EXPECT_EQ(cluster.client.CountOf(Verb::kGet, kApiServices, "v1beta1.metrics.example.com"), 1);
}

TEST(CheckTargets, EmptyCaBundleIsAMismatchNamingTheWebhook) {
  Cluster cluster;
  cluster.client.Put(kValidatingWebhookConfigurations,
                     WebhookConfiguration("x", {Webhook("a.example.com", ""),
                                                Webhook("b.example.com", Encoded({&cluster.ca}))}));
  const CheckReport report = cluster.Check(Validating("x"));
  ASSERT_THAT(report.AllFindings(),
              ElementsAre(IsFinding(FindingCode::kCaBundleMismatch,
                                    "validatingwebhookconfiguration/x webhook a.example.com")));
  EXPECT_THAT(report.AllFindings()[0].message, HasSubstr("empty"));
  EXPECT_THAT(report.targets,
              ElementsAre(IsStatus("ValidatingWebhookConfiguration", "x", "a.example.com", false),
                          IsStatus("ValidatingWebhookConfiguration", "x", "b.example.com", true)));
  EXPECT_FALSE(report.ok());
  EXPECT_EQ(cluster.client.WriteCount(), 0);
}

TEST(CheckTargets, ForeignCaIsAMismatch) {
  Cluster cluster;
  const pki::KeyPair foreign = MustCa("someone-else");
  cluster.client.Put(kValidatingWebhookConfigurations,
                     WebhookConfiguration("x", {Webhook("a.example.com", Encoded({&foreign}))}));
  const CheckReport report = cluster.Check(Validating("x"));
  ASSERT_THAT(report.AllFindings(),
              ElementsAre(IsFinding(FindingCode::kCaBundleMismatch,
                                    "validatingwebhookconfiguration/x webhook a.example.com")));
  EXPECT_THAT(report.AllFindings()[0].message, HasSubstr("does not contain the CA"));
  EXPECT_THAT(report.targets,
              ElementsAre(IsStatus("ValidatingWebhookConfiguration", "x", "a.example.com", false)));
}

TEST(CheckTargets, UnparsableCaBundleIsAMismatch) {
  Cluster cluster;
  cluster.client.Put(
      kValidatingWebhookConfigurations,
      WebhookConfiguration("x", {Webhook("a.example.com", Base64Encode("not a certificate"))}));
  const CheckReport report = cluster.Check(Validating("x"));
  ASSERT_THAT(report.AllFindings(),
              ElementsAre(IsFinding(FindingCode::kCaBundleMismatch,
                                    "validatingwebhookconfiguration/x webhook a.example.com")));
  EXPECT_THAT(report.AllFindings()[0].message, HasSubstr("does not parse"));
}

TEST(CheckTargets, CaBundleThatIsNotBase64IsAMismatchOfTheObject) {
  Cluster cluster;
  cluster.client.Put(
      kValidatingWebhookConfigurations,
      WebhookConfiguration("x", {Webhook("a.example.com", BundlePem({&cluster.ca}))}));
  const CheckReport report = cluster.Check(Validating("x"));
  ASSERT_THAT(report.AllFindings(), ElementsAre(IsFinding(FindingCode::kCaBundleMismatch,
                                                          "validatingwebhookconfiguration/x")));
  EXPECT_THAT(report.AllFindings()[0].message, HasSubstr("webhooks[0].clientConfig.caBundle"));
  EXPECT_THAT(report.targets,
              ElementsAre(IsStatus("ValidatingWebhookConfiguration", "x", "", false)));
}

TEST(CheckTargets, BundleHoldingOldAndNewCaDuringRotationIsOk) {
  Cluster cluster;
  const pki::KeyPair old_ca = MustCa("webhook-ca-old", kClock.Now() - 300 * kDay);
  // The Secret after step 1 of a rotation: ca.crt = new + old, leaf issued by the new CA.
  cluster.client.Put(kSecrets, TlsSecret({&cluster.ca, &old_ca}, cluster.ca, cluster.leaf));
  cluster.client.Put(
      kValidatingWebhookConfigurations,
      WebhookConfiguration("x", {Webhook("a.example.com", Encoded({&old_ca, &cluster.ca})),
                                 Webhook("b.example.com", Encoded({&cluster.ca, &old_ca}))}));
  const CheckReport report = cluster.Check(Validating("x"));
  EXPECT_THAT(report.AllFindings(), IsEmpty());
  EXPECT_THAT(report.targets,
              ElementsAre(IsStatus("ValidatingWebhookConfiguration", "x", "a.example.com", true),
                          IsStatus("ValidatingWebhookConfiguration", "x", "b.example.com", true)));
}

TEST(CheckTargets, BundleHoldingOnlyTheOldCaIsAMismatch) {
  Cluster cluster;
  const pki::KeyPair old_ca = MustCa("webhook-ca-old", kClock.Now() - 300 * kDay);
  cluster.client.Put(kSecrets, TlsSecret({&cluster.ca, &old_ca}, cluster.ca, cluster.leaf));
  cluster.client.Put(kValidatingWebhookConfigurations,
                     WebhookConfiguration("x", {Webhook("a.example.com", Encoded({&old_ca}))}));
  const CheckReport report = cluster.Check(Validating("x"));
  EXPECT_THAT(report.AllFindings(),
              ElementsAre(IsFinding(FindingCode::kCaBundleMismatch,
                                    "validatingwebhookconfiguration/x webhook a.example.com")));
}

// The Secret's chain is broken (its own finding says so): which CA a caBundle should hold is
// unknown, so only an empty or unreadable caBundle is blamed, never one that may well hold
// the leaf's real issuer.
TEST(CheckTargets, WithoutAnIssuerOnlyAnEmptyOrUnreadableBundleIsBlamed) {
  Cluster cluster;
  const pki::KeyPair second = MustCa("second-ca");
  const pki::KeyPair stranger = MustCa("stranger-ca");
  const pki::KeyPair stray_leaf = MustLeaf(stranger);
  cluster.client.Put(kSecrets, TlsSecret({&cluster.ca, &second}, cluster.ca, stray_leaf));
  cluster.client.Put(kValidatingWebhookConfigurations,
                     WebhookConfiguration("x", {Webhook("a.example.com", Encoded({&cluster.ca})),
                                                Webhook("b.example.com", Encoded({&stranger})),
                                                Webhook("c.example.com", "")}));
  const CheckReport report = cluster.Check(Validating("x"));
  const std::vector<Finding> findings = report.AllFindings();
  EXPECT_THAT(findings, Contains(IsFinding(FindingCode::kUntrustedChain,
                                           std::string(kSecretObject) + "[tls.crt]")));
  for (const char* webhook : {"a.example.com", "b.example.com"}) {
    EXPECT_THAT(findings,
                Not(Contains(IsFinding(
                    FindingCode::kCaBundleMismatch,
                    std::string("validatingwebhookconfiguration/x webhook ") + webhook))));
  }
  EXPECT_THAT(findings,
              Contains(IsFinding(FindingCode::kCaBundleMismatch,
                                 "validatingwebhookconfiguration/x webhook c.example.com")));
  for (const TargetStatus& target : report.targets) {
    EXPECT_FALSE(target.ok) << target.webhook;  // not known to be right either
  }
}

TEST(CheckTargets, WithoutAReadableCaTargetsAreNotOkButNotBlamed) {
  Cluster cluster;
  Json secret = TlsSecret({&cluster.ca}, cluster.ca, cluster.leaf);
  secret["data"].erase("ca.crt");
  cluster.client.Put(kSecrets, secret);
  cluster.client.Put(kValidatingWebhookConfigurations,
                     WebhookConfiguration("x", {Webhook("a.example.com", Encoded({&cluster.ca}))}));
  const CheckReport report = cluster.Check(Validating("x"));
  EXPECT_THAT(report.AllFindings(),
              Contains(IsFinding(FindingCode::kMissing, std::string(kSecretObject) + "[ca.crt]")));
  EXPECT_THAT(report.AllFindings(),
              Not(Contains(Field(&Finding::code, FindingCode::kCaBundleMismatch))));
  EXPECT_THAT(report.targets,
              ElementsAre(IsStatus("ValidatingWebhookConfiguration", "x", "a.example.com", false)));
}

TEST(CheckTargets, MissingNamedTargetsAreTargetMissing) {
  Cluster cluster;
  TargetSelection selection;
  selection.validating_webhooks = {"v"};
  selection.mutating_webhooks = {"m"};
  selection.crds = {"widgets.example.com"};
  selection.api_services = {"v1beta1.metrics.example.com"};
  const CheckReport report = cluster.Check(selection);
  EXPECT_THAT(
      report.AllFindings(),
      ElementsAre(
          IsFinding(FindingCode::kTargetMissing, "validatingwebhookconfiguration/v"),
          IsFinding(FindingCode::kTargetMissing, "mutatingwebhookconfiguration/m"),
          IsFinding(FindingCode::kTargetMissing, "customresourcedefinition/widgets.example.com"),
          IsFinding(FindingCode::kTargetMissing, "apiservice/v1beta1.metrics.example.com")));
  EXPECT_THAT(report.targets, IsEmpty());
  EXPECT_FALSE(report.ok());
}

TEST(CheckTargets, SelectorMatchingNothingIsTargetMissing) {
  Cluster cluster;
  cluster.client.Put(kValidatingWebhookConfigurations,
                     WebhookConfiguration("x", {Webhook("a.example.com", Encoded({&cluster.ca}))},
                                          {{"app", "other"}}));
  TargetSelection selection;
  selection.webhook_selector = "app=webhook";
  const CheckReport report = cluster.Check(selection);
  ASSERT_THAT(report.AllFindings(),
              ElementsAre(IsFinding(FindingCode::kTargetMissing, "webhook-selector app=webhook")));
  EXPECT_THAT(report.targets, IsEmpty());
}

TEST(CheckTargets, SelectorMatchesBothWebhookKinds) {
  Cluster cluster;
  const std::string bundle = Encoded({&cluster.ca});
  const Json labels = {{"app", "webhook"}, {"tier", "admission"}};
  cluster.client.Put(kValidatingWebhookConfigurations,
                     WebhookConfiguration("v", {Webhook("v.example.com", bundle)}, labels));
  cluster.client.Put(kMutatingWebhookConfigurations,
                     WebhookConfiguration("m", {Webhook("m.example.com", "")}, labels));
  cluster.client.Put(kValidatingWebhookConfigurations,
                     WebhookConfiguration("unrelated", {Webhook("u.example.com", "")}));
  cluster.client.Put(
      kMutatingWebhookConfigurations,
      WebhookConfiguration("other", {Webhook("o.example.com", "")}, {{"app", "other"}}));
  cluster.client.ClearRequests();
  TargetSelection selection;
  selection.webhook_selector = "app=webhook,tier";
  const CheckReport report = cluster.Check(selection);

  EXPECT_THAT(
      report.targets,
      UnorderedElementsAre(IsStatus("ValidatingWebhookConfiguration", "v", "v.example.com", true),
                           IsStatus("MutatingWebhookConfiguration", "m", "m.example.com", false)));
  EXPECT_THAT(report.AllFindings(),
              ElementsAre(IsFinding(FindingCode::kCaBundleMismatch,
                                    "mutatingwebhookconfiguration/m webhook m.example.com")));
  EXPECT_EQ(cluster.client.CountOf(Verb::kList, kValidatingWebhookConfigurations), 1);
  EXPECT_EQ(cluster.client.CountOf(Verb::kList, kMutatingWebhookConfigurations), 1);
  EXPECT_EQ(cluster.client.WriteCount(), 0);
}

TEST(CheckTargets, DuplicateNamedAndSelectedTargetsAreReportedOnce) {
  Cluster cluster;
  const Json labels = {{"app", "webhook"}};
  cluster.client.Put(
      kValidatingWebhookConfigurations,
      WebhookConfiguration(
          "x", {Webhook("a.example.com", ""), Webhook("b.example.com", Encoded({&cluster.ca}))},
          labels));
  cluster.client.ClearRequests();
  TargetSelection selection;
  selection.validating_webhooks = {"x", "x", "gone", "gone"};
  selection.mutating_webhooks = {"x"};  // same name, other kind: a different object
  selection.webhook_selector = "app=webhook";
  const CheckReport report = cluster.Check(selection);

  EXPECT_THAT(report.targets,
              ElementsAre(IsStatus("ValidatingWebhookConfiguration", "x", "a.example.com", false),
                          IsStatus("ValidatingWebhookConfiguration", "x", "b.example.com", true)));
  EXPECT_THAT(report.AllFindings(),
              UnorderedElementsAre(
                  IsFinding(FindingCode::kCaBundleMismatch,
                            "validatingwebhookconfiguration/x webhook a.example.com"),
                  IsFinding(FindingCode::kTargetMissing, "validatingwebhookconfiguration/gone"),
                  IsFinding(FindingCode::kTargetMissing, "mutatingwebhookconfiguration/x")));
  EXPECT_EQ(cluster.client.CountOf(Verb::kGet, kValidatingWebhookConfigurations, "x"), 1);
  EXPECT_EQ(cluster.client.CountOf(Verb::kGet, kValidatingWebhookConfigurations, "gone"), 1);
}

TEST(CheckTargets, TargetWithoutWebhooksIsAFinding) {
  Cluster cluster;
  cluster.client.Put(kMutatingWebhookConfigurations, WebhookConfiguration("empty", {}));
  TargetSelection selection;
  selection.mutating_webhooks = {"empty"};
  const CheckReport report = cluster.Check(selection);
  ASSERT_THAT(report.AllFindings(), ElementsAre(IsFinding(FindingCode::kCaBundleMismatch,
                                                          "mutatingwebhookconfiguration/empty")));
  EXPECT_THAT(report.AllFindings()[0].message, HasSubstr("has no webhooks"));
  EXPECT_THAT(report.targets,
              ElementsAre(IsStatus("MutatingWebhookConfiguration", "empty", "", false)));
}

TEST(CheckTargets, CrdWithoutWebhookConversionIsAFinding) {
  Cluster cluster;
  Json crd = Crd("widgets.example.com", Encoded({&cluster.ca}));
  crd["spec"]["conversion"] = {{"strategy", "None"}};
  cluster.client.Put(kCustomResourceDefinitions, crd);
  TargetSelection selection;
  selection.crds = {"widgets.example.com"};
  const CheckReport report = cluster.Check(selection);
  ASSERT_THAT(report.AllFindings(),
              ElementsAre(IsFinding(FindingCode::kCaBundleMismatch,
                                    "customresourcedefinition/widgets.example.com")));
  EXPECT_THAT(report.AllFindings()[0].message, HasSubstr("spec.conversion.strategy"));
}

TEST(CheckTargets, ForbiddenGetIsAnErrorNamingTheTarget) {
  Cluster cluster;
  cluster.client.Put(kValidatingWebhookConfigurations,
                     WebhookConfiguration("x", {Webhook("a.example.com", Encoded({&cluster.ca}))}));
  cluster.client.InjectFailure(Verb::kGet, kValidatingWebhookConfigurations,
                               Error(ErrorCode::kPermissionDenied, "forbidden"));
  auto report = CheckSecret(cluster.client, kNs, kSecretName, Policy(), kClock.Now());
  ASSERT_TRUE(report.has_value()) << report.error().message();
  auto status = CheckTargets(cluster.client, Validating("x"), *report);
  ASSERT_FALSE(status.has_value());
  EXPECT_EQ(status.error().code(), ErrorCode::kPermissionDenied);
  EXPECT_EQ(status.error().message(), "get validatingwebhookconfiguration/x: forbidden");
}

TEST(CheckTargets, UnavailableGetIsAnErrorNamingTheTarget) {
  Cluster cluster;
  cluster.client.Put(kApiServices, ApiService("v1.x", Encoded({&cluster.ca})));
  cluster.client.InjectFailure(Verb::kGet, kApiServices,
                               Error(ErrorCode::kUnavailable, "connection refused"));
  auto report = CheckSecret(cluster.client, kNs, kSecretName, Policy(), kClock.Now());
  ASSERT_TRUE(report.has_value()) << report.error().message();
  TargetSelection selection;
  selection.api_services = {"v1.x"};
  auto status = CheckTargets(cluster.client, selection, *report);
  ASSERT_FALSE(status.has_value());
  EXPECT_EQ(status.error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(status.error().message(), "get apiservice/v1.x: connection refused");
}

TEST(CheckTargets, FailedSelectorListIsAnErrorNamingTheSelector) {
  Cluster cluster;
  cluster.client.InjectFailure(Verb::kList, kMutatingWebhookConfigurations,
                               Error(ErrorCode::kPermissionDenied, "forbidden"));
  auto report = CheckSecret(cluster.client, kNs, kSecretName, Policy(), kClock.Now());
  ASSERT_TRUE(report.has_value()) << report.error().message();
  TargetSelection selection;
  selection.webhook_selector = "app=webhook";
  auto status = CheckTargets(cluster.client, selection, *report);
  ASSERT_FALSE(status.has_value());
  EXPECT_EQ(status.error().code(), ErrorCode::kPermissionDenied);
  EXPECT_THAT(status.error().message(), AllOf(HasSubstr("list mutatingwebhookconfigurations"),
                                              HasSubstr("app=webhook"), HasSubstr("forbidden")));
}

TEST(CheckTargets, EmptySelectionReadsNothing) {
  Cluster cluster;
  auto report = CheckSecret(cluster.client, kNs, kSecretName, Policy(), kClock.Now());
  ASSERT_TRUE(report.has_value()) << report.error().message();
  cluster.client.ClearRequests();
  ASSERT_TRUE(CheckTargets(cluster.client, TargetSelection{}, *report).has_value());
  EXPECT_TRUE(TargetSelection{}.empty());
  EXPECT_THAT(report->targets, IsEmpty());
  EXPECT_THAT(cluster.client.Requests(), IsEmpty());
}

}  // namespace
}  // namespace check_test
}  // namespace certctl::controller
