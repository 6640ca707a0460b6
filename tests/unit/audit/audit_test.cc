#include "certctl/audit/audit.h"

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fakes/fake_client.h"
#include "support/target_objects.h"
#include "support/test_pki.h"

namespace certctl::audit {
namespace audit_test {
namespace {

using Json = nlohmann::json;
using certctl::testing::ApiService;
using certctl::testing::CaBuilder;
using certctl::testing::ConversionCrd;
using certctl::testing::FakeClient;
using certctl::testing::LeafBuilder;
using certctl::testing::Verb;
using certctl::testing::WebhookConfiguration;
using certctl::testing::WebhookEntry;
using std::chrono::hours;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const TimePoint kNow = std::chrono::system_clock::now();
constexpr char kNs[] = "infra";

std::string Ca(std::chrono::seconds validity = hours(24 * 365), TimePoint from = kNow - hours(1)) {
  return CaBuilder("audit-ca").At(from).Validity(validity).Build().certificate.ToPem();
}

Json Service(const std::string& name, std::int64_t port = 443) {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", {{"name", name}, {"namespace", kNs}}},
          {"spec", {{"ports", {{{"name", "https"}, {"port", port}}}}}}};
}

Json Slice(const std::string& service, bool ready) {
  return {{"apiVersion", "discovery.k8s.io/v1"},
          {"kind", "EndpointSlice"},
          {"metadata",
           {{"name", service + "-abc"},
            {"namespace", kNs},
            {"labels", {{"kubernetes.io/service-name", service}}}}},
          {"addressType", "IPv4"},
          {"endpoints", {{{"addresses", {"10.0.0.1"}}, {"conditions", {{"ready", ready}}}}}},
          {"ports", {{{"name", "https"}, {"port", 8443}}}}};
}

// Service `name` with one ready endpoint, so only what a test varies is found.
void Reachable(FakeClient& client, const std::string& name) {
  client.Put(kube::kServices, Service(name));
  client.Put(kube::kEndpointSlices, Slice(name, true));
}

WebhookEntry Entry(const std::string& name, const std::string& service = "hook") {
  return std::move(WebhookEntry(name, kNs).Service(kNs, service).Bundle(Ca()));
}

AuditReport AuditOf(FakeClient& client, AuditOptions options = {}) {
  auto report = Audit(client, options, kNow);
  EXPECT_TRUE(report.has_value()) << report.error().message();
  return report.value_or(AuditReport{});
}

std::vector<std::string> Codes(const AuditReport& report) {
  std::vector<std::string> codes;
  for (const AuditFinding& finding : report.findings) {
    codes.push_back(std::string(FindingCodeName(finding.code)) + " " +
                    std::string(SeverityName(finding.severity)));
  }
  return codes;
}

TEST(Audit, AHealthyWebhookHasNoFindingAndItsBundleIsSummed) {
  FakeClient client;
  Reachable(client, "hook");
  client.Put(kube::kValidatingWebhookConfigurations,
             WebhookConfiguration("policy", {Entry("v.example.com")}));

  const AuditReport report = AuditOf(client);

  EXPECT_THAT(report.findings, IsEmpty());
  ASSERT_EQ(report.entries.size(), 1U);
  const AuditedEntry& entry = report.entries[0];
  EXPECT_EQ(entry.kind, "ValidatingWebhookConfiguration");
  EXPECT_EQ(entry.name, "policy");
  EXPECT_EQ(entry.entry, "webhooks[0] (v.example.com)");
  EXPECT_EQ(entry.calls, "hook.infra.svc");
  EXPECT_EQ(entry.failure_policy, "Fail");
  EXPECT_EQ(entry.bundle_certificates, 1);
  ASSERT_TRUE(entry.bundle_not_after.has_value());
  EXPECT_GT(*entry.bundle_not_after, kNow + hours(24 * 300));
  EXPECT_FALSE(report.Fails(Severity::kWarning));
  EXPECT_EQ(client.WriteCount(), 0);
}

TEST(Audit, AnObjectAskingForItsCaByAnnotationSaysWhichAndFromWhere) {
  FakeClient client;
  Reachable(client, "hook");
  Json asking = WebhookConfiguration("policy", {Entry("v.example.com")});
  asking["metadata"]["annotations"] = {{"certctl.io/inject-ca-from", "team-a/hook-tls"}};
  Json cert_manager = WebhookConfiguration("legacy", {Entry("l.example.com")});
  cert_manager["metadata"]["annotations"] = {
      {"cert-manager.io/inject-ca-from-secret", "team-b/legacy-tls"}};
  client.Put(kube::kValidatingWebhookConfigurations, asking);
  client.Put(kube::kValidatingWebhookConfigurations, cert_manager);
  client.Put(kube::kValidatingWebhookConfigurations,
             WebhookConfiguration("plain", {Entry("p.example.com")}));

  std::map<std::string, std::string> from;
  for (const AuditedEntry& entry : AuditOf(client).entries) {
    from[entry.name] = entry.injection_annotation + " " + entry.injected_from;
  }

  EXPECT_EQ(from["policy"], "certctl.io/inject-ca-from team-a/hook-tls");
  EXPECT_EQ(from["legacy"], "cert-manager.io/inject-ca-from-secret team-b/legacy-tls");
  EXPECT_EQ(from["plain"], " ");
}

TEST(Audit, TheCaBundleIsJudged) {
  FakeClient client;
  Reachable(client, "hook");
  client.Put(
      kube::kValidatingWebhookConfigurations,
      WebhookConfiguration(
          "bundles", {WebhookEntry("missing.example.com", kNs).Service(kNs, "hook"),
                      WebhookEntry("garbage.example.com", kNs).Service(kNs, "hook").RawBundle("%%"),
                      Entry("expired.example.com").Bundle(Ca(hours(2), kNow - hours(3))),
                      Entry("soon.example.com").Bundle(Ca(hours(24 * 10))),
                      WebhookEntry("url.example.com", kNs).Url("https://hook.example.com/v")}));

  const AuditReport report = AuditOf(client);

  EXPECT_THAT(Codes(report),
              ElementsAre("ca-bundle-missing critical", "ca-bundle-unparsable critical",
                          "ca-bundle-expired critical", "ca-bundle-expiring-soon warning"));
  EXPECT_EQ(report.findings[0].object, "validatingwebhookconfiguration/bundles");
  EXPECT_EQ(report.findings[0].entry, "webhooks[0] (missing.example.com)");
  EXPECT_EQ(report.entries.size(), 5U);
  EXPECT_EQ(report.entries[4].bundle_certificates, 0);  // a URL trusts the API server's roots
}

TEST(Audit, AnUnreachableServiceIsCriticalUnderFailAndAWarningUnderIgnore) {
  FakeClient client;
  client.Put(kube::kServices, Service("no-endpoints"));
  client.Put(kube::kEndpointSlices, Slice("no-endpoints", false));
  client.Put(kube::kServices, Service("other-port", 8443));
  client.Put(
      kube::kMutatingWebhookConfigurations,
      WebhookConfiguration("reach", {Entry("gone.example.com", "gone"),
                                     Entry("ignored.example.com", "gone").FailurePolicy("Ignore"),
                                     Entry("port.example.com", "other-port"),
                                     Entry("down.example.com", "no-endpoints")}));

  const AuditReport report = AuditOf(client);

  EXPECT_THAT(Codes(report),
              ElementsAre("service-missing critical", "service-missing warning",
                          "service-port-missing critical", "no-ready-endpoints critical"));
  EXPECT_THAT(report.findings[0].message,
              HasSubstr("service/infra/gone, which does not exist: with failurePolicy Fail "
                        "every request it matches is refused now"));
  EXPECT_THAT(report.findings[1].message, HasSubstr("go through unchecked"));
  EXPECT_TRUE(report.Fails(Severity::kCritical));
}

TEST(Audit, ServicesTheCredentialsMayNotListAreANoteNotAFailure) {
  FakeClient client;
  client.Put(kube::kValidatingWebhookConfigurations,
             WebhookConfiguration("policy", {Entry("v.example.com", "gone")}));
  client.InjectFailure(Verb::kList, kube::kServices,
                       Error(ErrorCode::kPermissionDenied, "services is forbidden"));

  const AuditReport report = AuditOf(client);

  EXPECT_THAT(report.findings, IsEmpty());
  ASSERT_EQ(report.notes.size(), 1U);
  EXPECT_THAT(report.notes[0], HasSubstr("could not list Services (services is forbidden)"));
}

TEST(Audit, AnyOtherApiFailureIsAnError) {
  FakeClient client;
  client.InjectFailure(Verb::kList, kube::kMutatingWebhookConfigurations,
                       Error(ErrorCode::kUnavailable, "connection refused"));

  auto report = Audit(client, {}, kNow);

  ASSERT_FALSE(report.has_value());
  EXPECT_THAT(report.error().message(), HasSubstr("mutatingwebhookconfigurations"));
}

const Json kPodCreation = {{{"operations", {"CREATE"}},
                            {"apiGroups", {""}},
                            {"apiVersions", {"v1"}},
                            {"resources", {"pods"}}}};

TEST(Audit, AWebhookThatFailsClosedOnItsOwnPodsIsASelfDeadlock) {
  FakeClient client;
  Reachable(client, "hook");
  const Json not_own = {
      {"matchExpressions",
       {{{"key", "kubernetes.io/metadata.name"}, {"operator", "NotIn"}, {"values", {kNs}}}}}};
  // Validating: called together, their timeouts do not add up.
  client.Put(
      kube::kValidatingWebhookConfigurations,
      WebhookConfiguration(
          "pods", {Entry("own.example.com").Rules(kPodCreation),
                   Entry("ignore.example.com").Rules(kPodCreation).FailurePolicy("Ignore"),
                   Entry("excluded.example.com").Rules(kPodCreation).NamespaceSelector(not_own),
                   Entry("labelled.example.com")
                       .Rules(kPodCreation)
                       .ObjectSelector({{"matchLabels", {{"app", "other"}}}}),
                   Entry("team.example.com")
                       .Rules(kPodCreation)
                       .NamespaceSelector({{"matchLabels", {{"team", "a"}}}})}));

  const AuditReport report = AuditOf(client);

  ASSERT_THAT(Codes(report), ElementsAre("self-deadlock warning"));
  EXPECT_EQ(report.findings[0].entry, "webhooks[0] (own.example.com)");
  EXPECT_THAT(report.findings[0].message, HasSubstr("Pods in infra"));
}

TEST(Audit, MutatingTimeoutsAddUpButValidatingOnesRunTogether) {
  FakeClient client;
  Reachable(client, "hook");
  std::vector<Json> mutating;
  std::vector<Json> validating;
  for (const char* name : {"a.example.com", "b.example.com", "c.example.com", "d.example.com"}) {
    mutating.push_back(Entry(name).FailurePolicy("Ignore").Rules(kPodCreation).TimeoutSeconds(10));
    validating.push_back(
        Entry(name).FailurePolicy("Ignore").Rules(kPodCreation).TimeoutSeconds(15));
  }
  client.Put(kube::kValidatingWebhookConfigurations, WebhookConfiguration("v", validating));

  EXPECT_THAT(AuditOf(client).findings, IsEmpty());  // 15 s: the four are called together

  client.Put(kube::kMutatingWebhookConfigurations, WebhookConfiguration("m", mutating));
  const AuditReport report = AuditOf(client);

  ASSERT_THAT(Codes(report), ElementsAre("timeouts-add-up warning"));
  EXPECT_EQ(report.findings[0].object, "CREATE pods");
  EXPECT_THAT(report.findings[0].message, HasSubstr("may wait 55 s on webhooks"));
  EXPECT_THAT(report.findings[0].message, HasSubstr("4 mutating, called one after another"));
}

TEST(Audit, OnlyCrdsConvertedByAWebhookAndApiServicesWithAServiceAreAudited) {
  FakeClient client;
  Reachable(client, "hook");
  client.Put(kube::kCustomResourceDefinitions,
             ConversionCrd("widgets.example.com",
                           {{"service", {{"namespace", kNs}, {"name", "hook"}}}}, Ca()));
  Json plain = ConversionCrd("plain.example.com", {{"url", "https://x.example.com"}});
  plain["spec"]["conversion"] = {{"strategy", "None"}};
  client.Put(kube::kCustomResourceDefinitions, plain);
  client.Put(kube::kApiServices,
             ApiService("v1.metrics.example.com", {{"namespace", kNs}, {"name", "gone"}}, Ca()));
  Json local = ApiService("v1.apps", nullptr);
  client.Put(kube::kApiServices, local);

  const AuditReport report = AuditOf(client);

  ASSERT_EQ(report.entries.size(), 2U);
  EXPECT_EQ(report.entries[0].entry, "spec.conversion.webhook");
  EXPECT_EQ(report.entries[1].entry, "spec.service");
  EXPECT_EQ(report.entries[1].failure_policy, "");
  EXPECT_THAT(Codes(report), ElementsAre("service-missing critical"));
  EXPECT_THAT(report.findings[0].message, HasSubstr("every request the API server sends it"));
}

TEST(Audit, TheSelectorLimitsEveryKind) {
  FakeClient client;
  Reachable(client, "hook");
  client.Put(kube::kValidatingWebhookConfigurations,
             WebhookConfiguration("mine", {Entry("v.example.com")}, {{"team", "a"}}));
  client.Put(kube::kValidatingWebhookConfigurations,
             WebhookConfiguration("theirs", {Entry("w.example.com", "gone")}));
  AuditOptions options;
  options.selector = "team=a";

  const AuditReport report = AuditOf(client, options);

  ASSERT_EQ(report.entries.size(), 1U);
  EXPECT_EQ(report.entries[0].name, "mine");
  EXPECT_THAT(report.findings, IsEmpty());
}

// --- --handshake ----------------------------------------------------------------------------

// A stand-in for the network: what each address serves, and every dial made.
struct Dials {
  struct Made {
    std::string address;
    std::string server_name;
    std::string bundle_pem;
    std::chrono::milliseconds timeout;
  };
  std::map<std::string, probe::HandshakeOutcome> served;  // by "host:port"
  std::vector<Made> made;
  std::mutex mutex;

  Dialer Dial() {
    return [this](const HostPort& address, const std::string& name, const std::string& pem,
                  std::chrono::milliseconds timeout) {
      const std::lock_guard<std::mutex> lock(mutex);
      made.push_back({FormatHostPort(address), name, pem, timeout});
      const auto it = served.find(FormatHostPort(address));
      if (it == served.end()) {
        return probe::HandshakeOutcome{
            Fail(ErrorCode::kUnavailable, "cannot connect to " + FormatHostPort(address)), false,
            ""};
      }
      return it->second;
    };
  }
};

probe::HandshakeOutcome Serves(const std::string& leaf_pem) { return {{}, false, leaf_pem}; }

Json SliceAt(const std::string& service, const std::string& address) {
  Json slice = Slice(service, true);
  slice["endpoints"][0]["addresses"] = {address};
  slice["metadata"]["name"] = service + "-" + address;
  return slice;
}

TEST(AuditHandshake, WithoutTheFlagNothingIsDialled) {
  FakeClient client;
  Reachable(client, "hook");
  client.Put(kube::kValidatingWebhookConfigurations,
             WebhookConfiguration("policy", {Entry("v.example.com")}));
  Dials dials;
  AuditOptions options;
  options.dial = dials.Dial();

  EXPECT_THAT(AuditOf(client, options).findings, IsEmpty());
  EXPECT_THAT(dials.made, IsEmpty());
}

TEST(AuditHandshake, EachReadyEndpointIsDialledOnceAsTheApiServerWould) {
  const pki::KeyPair ca = CaBuilder("hook-ca").At(kNow - hours(1)).Build();
  const std::string bundle = ca.certificate.ToPem();
  FakeClient client;
  client.Put(kube::kServices, Service("hook"));
  client.Put(kube::kEndpointSlices, SliceAt("hook", "10.0.0.1"));
  client.Put(kube::kEndpointSlices, SliceAt("hook", "10.0.0.2"));
  // Two entries with the same bundle and Service: each address is dialled once, waiting as
  // long as the more patient entry.
  client.Put(kube::kValidatingWebhookConfigurations,
             WebhookConfiguration(
                 "policy", {WebhookEntry("a.example.com", kNs).Service(kNs, "hook").Bundle(bundle),
                            WebhookEntry("b.example.com", kNs)
                                .Service(kNs, "hook")
                                .Bundle(bundle)
                                .TimeoutSeconds(3)}));
  Dials dials;
  const pki::KeyPair leaf =
      LeafBuilder(ca).At(kNow - hours(1)).DnsNames({"hook.infra.svc"}).Build();
  dials.served["10.0.0.1:8443"] = Serves(leaf.certificate.ToPem());
  dials.served["10.0.0.2:8443"] = Serves(leaf.certificate.ToPem());
  AuditOptions options;
  options.handshake = true;
  options.dial = dials.Dial();

  const AuditReport report = AuditOf(client, options);

  EXPECT_THAT(report.findings, IsEmpty());
  ASSERT_EQ(dials.made.size(), 2U);
  std::set<std::string> addresses;
  for (const Dials::Made& made : dials.made) {
    addresses.insert(made.address);
    EXPECT_EQ(made.server_name, "hook.infra.svc");
    EXPECT_EQ(made.bundle_pem, bundle);
    EXPECT_EQ(made.timeout, std::chrono::seconds(10));
  }
  EXPECT_THAT(addresses, ElementsAre("10.0.0.1:8443", "10.0.0.2:8443"));
  EXPECT_EQ(client.WriteCount(), 0);
}

TEST(AuditHandshake, WhatIsServedIsJudged) {
  const pki::KeyPair ca = CaBuilder("hook-ca").At(kNow - hours(1)).Build();
  const std::string bundle = ca.certificate.ToPem();
  FakeClient client;
  for (const char* name : {"named", "other-name", "untrusted", "ending", "half"}) {
    client.Put(kube::kServices, Service(name));
  }
  client.Put(kube::kEndpointSlices, SliceAt("named", "10.0.0.1"));
  client.Put(kube::kEndpointSlices, SliceAt("other-name", "10.0.0.2"));
  client.Put(kube::kEndpointSlices, SliceAt("untrusted", "10.0.0.3"));
  client.Put(kube::kEndpointSlices, SliceAt("ending", "10.0.0.4"));
  client.Put(kube::kEndpointSlices, SliceAt("half", "10.0.0.5"));
  client.Put(kube::kEndpointSlices, SliceAt("half", "10.0.0.6"));
  const auto entry = [&](const std::string& service) {
    return WebhookEntry(service + ".example.com", kNs).Service(kNs, service).Bundle(bundle);
  };
  client.Put(kube::kValidatingWebhookConfigurations,
             WebhookConfiguration("served", {entry("named"), entry("other-name"),
                                             entry("untrusted"), entry("ending"), entry("half")}));
  // A URL entry is dialled at its host and port; an expired bundle is not dialled at all.
  client.Put(
      kube::kMutatingWebhookConfigurations,
      WebhookConfiguration(
          "elsewhere",
          {WebhookEntry("url.example.com", kNs).Url("https://10.9.9.9:7443/m").Bundle(bundle),
           Entry("expired.example.com", "named").Bundle(Ca(hours(2), kNow - hours(3)))}));
  const auto leaf_for = [&](const std::string& name, std::chrono::seconds validity) {
    return LeafBuilder(ca).At(kNow - hours(1)).Validity(validity).DnsNames({name}).Build();
  };
  Dials dials;
  dials.served["10.0.0.1:8443"] =
      Serves(leaf_for("named.infra.svc", hours(24 * 90)).certificate.ToPem());
  dials.served["10.0.0.2:8443"] = {
      Fail(ErrorCode::kFailedPrecondition,
           "TLS handshake with 10.0.0.2:8443: its certificate is not valid for "
           "other-name.infra.svc"),
      true, leaf_for("hook.infra.svc", hours(24 * 90)).certificate.ToPem()};
  dials.served["10.0.0.3:8443"] = {
      Fail(ErrorCode::kFailedPrecondition,
           "TLS handshake with 10.0.0.3:8443: its certificate does not verify against the "
           "caBundle: unable to get local issuer certificate"),
      false, ""};
  dials.served["10.0.0.4:8443"] =
      Serves(leaf_for("ending.infra.svc", hours(24 * 5)).certificate.ToPem());
  dials.served["10.0.0.5:8443"] =
      Serves(leaf_for("half.infra.svc", hours(24 * 90)).certificate.ToPem());
  // 10.0.0.6 and the URL's address refuse the connection.
  AuditOptions options;
  options.handshake = true;
  options.dial = dials.Dial();

  const AuditReport report = AuditOf(client, options);

  EXPECT_THAT(Codes(report),
              ElementsAre("target-name-not-covered critical", "handshake-failed critical",
                          "serving-cert-expiring-soon warning", "handshake-failed critical",
                          "handshake-failed critical", "ca-bundle-expired critical"));
  EXPECT_EQ(report.findings[0].entry, "webhooks[1] (other-name.example.com)");
  EXPECT_THAT(report.findings[0].message, HasSubstr("not valid for other-name.infra.svc"));
  EXPECT_THAT(report.findings[1].message, HasSubstr("does not verify against the caBundle"));
  EXPECT_THAT(report.findings[2].message,
              HasSubstr("10.0.0.4:8443 serves a certificate that ends"));
  EXPECT_THAT(report.findings[3].message, HasSubstr("cannot connect to 10.0.0.6:8443"));
  EXPECT_THAT(report.findings[3].message, HasSubstr("1 of the 2 addresses dialled failed"));
  EXPECT_THAT(report.findings[4].message, HasSubstr("cannot connect to 10.9.9.9:7443"));
  EXPECT_EQ(dials.made.size(), 7U);
}

}  // namespace
}  // namespace audit_test
}  // namespace certctl::audit
