#include "certctl/controller/callable.h"

#include <chrono>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/controller/failure_policy.h"
#include "certctl/kube/object.h"

#include "fakes/fake_client.h"
#include "fakes/fake_clock.h"
#include "support/target_objects.h"

namespace certctl::controller {
namespace callable_test {
namespace {

using certctl::testing::ApiService;
using certctl::testing::ConversionCrd;
using certctl::testing::FakeClient;
using certctl::testing::Verb;
using certctl::testing::WebhookConfiguration;
using certctl::testing::WebhookEntry;
using inject::TargetKind;
using Json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr char kNs[] = "demo";

pki::CertificateInfo Leaf(std::vector<std::string> dns, std::vector<std::string> ips = {}) {
  pki::CertificateInfo leaf;
  leaf.dns_names = std::move(dns);
  leaf.ip_addresses = std::move(ips);
  return leaf;
}

TargetObject Vwc(const std::string& name, std::vector<Json> entries) {
  return {TargetKind::kValidatingWebhookConfiguration, name,
          WebhookConfiguration(name, std::move(entries))};
}

MATCHER_P2(IsFinding, code, object, "") { return arg.code == code && arg.object == object; }

TEST(CallFindings, ANameTheLeafDoesNotCoverIsNamedWithWhatTheLeafNames) {
  const pki::CertificateInfo leaf =
      Leaf({"hook-b.demo.svc", "hook-b", "hook-b.demo", "hook-b.demo.svc.cluster.local"});
  const auto findings =
      CallFindings({Vwc("policy", {WebhookEntry("ok.example.com", kNs).Service(kNs, "hook-b"),
                                   WebhookEntry("check.example.com", kNs).Service(kNs, "hook-a")})},
                   leaf);
  ASSERT_THAT(findings, ElementsAre(IsFinding(FindingCode::kTargetNameNotCovered,
                                              "validatingwebhookconfiguration/policy")));
  EXPECT_EQ(findings[0].message,
            "webhooks[1] (check.example.com) calls hook-a.demo.svc, which the certificate does "
            "not name (it names hook-b.demo.svc, hook-b, hook-b.demo, "
            "hook-b.demo.svc.cluster.local)");
}

TEST(CallFindings, UrlsAreJudgedByTheirHostAndIpsAgainstIpSans) {
  const pki::CertificateInfo leaf = Leaf({"hook.example.com"}, {"10.0.0.5", "fd00::1"});
  EXPECT_THAT(
      CallFindings(
          {Vwc("u", {WebhookEntry("a.example.com", kNs).Url("https://hook.example.com:8443/v"),
                     WebhookEntry("b.example.com", kNs).Url("https://10.0.0.5/v"),
                     WebhookEntry("c.example.com", kNs).Url("https://[fd00::1]:9443/v")})},
          leaf),
      IsEmpty());
  const auto findings = CallFindings(
      {Vwc("u", {WebhookEntry("a.example.com", kNs).Url("https://10.0.0.6/v")})}, leaf);
  ASSERT_THAT(findings, SizeIs(1));
  EXPECT_EQ(findings[0].message,
            "webhooks[0] (a.example.com) calls https://10.0.0.6/v, whose host 10.0.0.6 the "
            "certificate does not name (it names hook.example.com, 10.0.0.5, fd00::1)");
}

TEST(CallFindings, AWildcardSanCoversOneLabel) {
  const pki::CertificateInfo leaf = Leaf({"*.demo.svc"});
  EXPECT_THAT(
      CallFindings({Vwc("w", {WebhookEntry("a.example.com", kNs).Service(kNs, "x")})}, leaf),
      IsEmpty());
  EXPECT_THAT(
      CallFindings({Vwc("w", {WebhookEntry("a.example.com", kNs).Service("other", "x")})}, leaf),
      SizeIs(1));
}

TEST(CallFindings, AMalformedEntryIsTargetInvalidAndTheOthersAreStillJudged) {
  const auto findings =
      CallFindings({Vwc("bad", {WebhookEntry("a.example.com", kNs).Url("http://hook.example.com/"),
                                WebhookEntry("b.example.com", kNs).Service(kNs, "elsewhere")})},
                   Leaf({"hook.demo.svc"}));
  ASSERT_THAT(
      findings,
      ElementsAre(
          IsFinding(FindingCode::kTargetInvalid, "validatingwebhookconfiguration/bad"),
          IsFinding(FindingCode::kTargetNameNotCovered, "validatingwebhookconfiguration/bad")));
  EXPECT_THAT(findings[0].message, HasSubstr("webhooks[0].clientConfig.url"));
}

TEST(CallFindings, CrdAndApiServiceEntriesAreNamedByTheirField) {
  const auto findings = CallFindings(
      {{TargetKind::kCustomResourceDefinition, "widgets.example.com",
        ConversionCrd("widgets.example.com", {{"service", {{"namespace", kNs}, {"name", "c"}}}})},
       {TargetKind::kApiService, "v1.m.example.com",
        ApiService("v1.m.example.com", {{"namespace", kNs}, {"name", "m"}})}},
      Leaf({"hook.demo.svc"}));
  ASSERT_THAT(findings, SizeIs(2));
  EXPECT_EQ(findings[0].object, "customresourcedefinition/widgets.example.com");
  EXPECT_THAT(findings[0].message, HasSubstr("spec.conversion.webhook calls c.demo.svc"));
  EXPECT_EQ(findings[1].object, "apiservice/v1.m.example.com");
  EXPECT_THAT(findings[1].message, HasSubstr("spec.service calls m.demo.svc"));
}

TEST(CallFindings, AnApiServiceThatSkipsVerificationNeedsNoName) {
  Json skip = ApiService("v1.m.example.com", {{"namespace", kNs}, {"name", "m"}});
  skip["spec"]["insecureSkipTLSVerify"] = true;
  EXPECT_THAT(
      CallFindings({{TargetKind::kApiService, "v1.m.example.com", skip}}, Leaf({"hook.demo.svc"})),
      IsEmpty());
}

// --- What the API server would dial -----------------------------------------------------

Json Service(const std::string& name, std::vector<Json> ports, std::string type = "") {
  Json spec = {{"ports", std::move(ports)}};
  if (!type.empty()) {
    spec["type"] = type;
  }
  return {{"metadata", {{"name", name}, {"namespace", kNs}}}, {"spec", std::move(spec)}};
}

Json Slice(const std::string& service, std::vector<Json> endpoints, Json ports = nullptr) {
  Json slice = {{"metadata",
                 {{"name", service + "-x"},
                  {"namespace", kNs},
                  {"labels", {{"kubernetes.io/service-name", service}}}}},
                {"addressType", "IPv4"},
                {"endpoints", std::move(endpoints)}};
  if (!ports.is_null()) {
    slice["ports"] = std::move(ports);
  }
  return slice;
}

struct ServiceCheck : ::testing::Test {
  // A report whose one target calls hook in demo on `port` from two entries.
  CheckReport Report(std::int64_t port = 443) {
    CheckReport report;
    const TargetObject target =
        Vwc("hook", {WebhookEntry("a.example.com", kNs).Service(kNs, "hook", port),
                     WebhookEntry("b.example.com", kNs).Service(kNs, "hook", port)});
    for (CallVerdict& verdict : JudgeCalls(target, nullptr)) {
      TargetStatus status{"ValidatingWebhookConfiguration",
                          "hook",
                          verdict.endpoint.entry,
                          true,
                          "",
                          verdict.endpoint.Calls(),
                          verdict.endpoint,
                          false};
      report.targets.push_back(std::move(status));
    }
    return report;
  }

  FakeClient client;
};

TEST_F(ServiceCheck, AServiceWithAReadyEndpointOnThePortIsFine) {
  client.Put(kube::kServices, Service("hook", {{{"port", 443}}}));
  client.Put(kube::kEndpointSlices,
             Slice("hook", {{{"addresses", {"10.244.0.1"}}, {"conditions", {{"ready", true}}}}},
                   Json::array({{{"port", 9443}}})));
  CheckReport report = Report();
  ASSERT_TRUE(CheckServices(client, report).has_value());
  EXPECT_THAT(report.call_findings, IsEmpty());
  EXPECT_THAT(report.notes, IsEmpty());
  EXPECT_TRUE(report.targets[0].ok && report.targets[1].ok);
  // One read of the Service and one list of its slices, however many entries call it.
  EXPECT_EQ(client.CountOf(Verb::kGet, kube::kServices), 1);
  EXPECT_EQ(client.CountOf(Verb::kList, kube::kEndpointSlices), 1);
}

TEST_F(ServiceCheck, AMissingServiceIsOneFindingNamingEveryCaller) {
  CheckReport report = Report();
  ASSERT_TRUE(CheckServices(client, report).has_value());
  ASSERT_THAT(report.call_findings,
              ElementsAre(IsFinding(FindingCode::kServiceMissing, "service/demo/hook")));
  EXPECT_EQ(report.call_findings[0].message,
            "does not exist; validatingwebhookconfiguration/hook webhooks[0] (a.example.com), "
            "validatingwebhookconfiguration/hook webhooks[1] (b.example.com) call it");
  EXPECT_FALSE(report.targets[0].ok || report.targets[1].ok);
}

TEST_F(ServiceCheck, APortTheServiceLacksIsAFinding) {
  client.Put(kube::kServices, Service("hook", {{{"port", 443}, {"name", "https"}}}));
  CheckReport report = Report(8443);
  ASSERT_TRUE(CheckServices(client, report).has_value());
  ASSERT_THAT(report.call_findings,
              ElementsAre(IsFinding(FindingCode::kServicePortMissing, "service/demo/hook")));
  EXPECT_THAT(report.call_findings[0].message, HasSubstr("has no port 8443 (it has 443)"));
}

TEST_F(ServiceCheck, EndpointsThatAreNotReadyOrOnAnotherPortDoNotCount) {
  client.Put(kube::kServices, Service("hook", {{{"port", 443}, {"name", "https"}}}));
  client.Put(kube::kEndpointSlices,
             Slice("hook", {{{"addresses", {"10.244.0.1"}}, {"conditions", {{"ready", false}}}}},
                   Json::array({{{"name", "https"}, {"port", 9443}}})));
  Json other = Slice("hook", {{{"addresses", {"10.244.0.2"}}}},
                     Json::array({{{"name", "metrics"}, {"port", 8080}}}));
  other["metadata"]["name"] = "hook-y";
  client.Put(kube::kEndpointSlices, other);
  CheckReport report = Report();
  ASSERT_TRUE(CheckServices(client, report).has_value());
  ASSERT_THAT(report.call_findings,
              ElementsAre(IsFinding(FindingCode::kNoReadyEndpoints, "service/demo/hook")));
  EXPECT_THAT(report.call_findings[0].message, HasSubstr("no ready endpoint for port 443"));

  // An endpoint without conditions is ready, as the EndpointSlice API defines it.
  Json ready = Slice("hook", {{{"addresses", {"10.244.0.3"}}}},
                     Json::array({{{"name", "https"}, {"port", 9443}}}));
  ready["metadata"]["name"] = "hook-z";
  client.Put(kube::kEndpointSlices, ready);
  CheckReport again = Report();
  ASSERT_TRUE(CheckServices(client, again).has_value());
  EXPECT_THAT(again.call_findings, IsEmpty());
}

TEST_F(ServiceCheck, AReadyThatIsNotABooleanIsNotReadyAndSaidInANote) {
  client.Put(kube::kServices, Service("hook", {{{"port", 443}, {"name", "https"}}}));
  client.Put(kube::kEndpointSlices,
             Slice("hook",
                   {{{"addresses", {"10.244.0.1"}}, {"conditions", {{"ready", "yes"}}}},
                    {{"addresses", {"10.244.0.2"}}, {"conditions", {{"ready", 1}}}}},
                   Json::array({{{"name", "https"}, {"port", 9443}}})));
  CheckReport report = Report();
  ASSERT_TRUE(CheckServices(client, report).has_value());
  ASSERT_THAT(report.call_findings,
              ElementsAre(IsFinding(FindingCode::kNoReadyEndpoints, "service/demo/hook")));
  ASSERT_THAT(report.notes, SizeIs(1));
  EXPECT_THAT(report.notes[0], HasSubstr("2 endpoints of service/demo/hook have a "
                                         "conditions.ready that is not true or false"));
}

TEST(JudgeServiceReach, TheReadyEndpointsAreWhereTheApiServerConnects) {
  const Json service = Service("hook", {{{"name", "https"}, {"port", 443}}});
  Json slices = Json::array();
  slices.push_back(Slice("hook",
                         {{{"addresses", {"10.244.0.1", "10.244.9.9"}}},
                          {{"addresses", {"10.244.0.2"}}, {"conditions", {{"ready", false}}}},
                          {{"addresses", {"10.244.0.3"}}, {"conditions", {{"ready", true}}}}},
                         {{{"name", "https"}, {"port", 9443}}}));
  // Another port of the same Service: not where port 443 goes.
  slices.push_back(
      Slice("hook", {{{"addresses", {"10.244.0.4"}}}}, {{{"name", "metrics"}, {"port", 8080}}}));
  auto reach = JudgeServiceReach(&service, &slices, 443, "service/demo/hook");
  ASSERT_TRUE(reach.has_value()) << reach.error().message();
  EXPECT_FALSE(reach->problem.has_value());
  ASSERT_EQ(reach->ready_addresses.size(), 2U);
  EXPECT_EQ(FormatHostPort(reach->ready_addresses[0]), "10.244.0.1:9443");
  EXPECT_EQ(FormatHostPort(reach->ready_addresses[1]), "10.244.0.3:9443");

  Json many = Json::array();
  std::vector<Json> endpoints;
  for (int i = 0; i < 20; ++i) {
    endpoints.push_back({{"addresses", {"10.244.1." + std::to_string(i)}}});
  }
  many.push_back(Slice("hook", std::move(endpoints), {{{"name", "https"}, {"port", 9443}}}));
  reach = JudgeServiceReach(&service, &many, 443, "service/demo/hook");
  ASSERT_TRUE(reach.has_value());
  EXPECT_EQ(reach->ready_addresses.size(), kReadyAddressesKept);
}

TEST_F(ServiceCheck, AServiceWithManyPortsIsAShortFinding) {
  std::vector<Json> ports;
  for (int port = 1; port <= 100000; ++port) {
    ports.push_back({{"port", port}, {"name", "p" + std::to_string(port)}});
  }
  ports.erase(ports.begin() + 442);  // no 443
  client.Put(kube::kServices, Service("hook", std::move(ports)));
  CheckReport report = Report();
  ASSERT_TRUE(CheckServices(client, report).has_value());
  ASSERT_THAT(report.call_findings,
              ElementsAre(IsFinding(FindingCode::kServicePortMissing, "service/demo/hook")));
  EXPECT_THAT(report.call_findings[0].message,
              HasSubstr("(it has 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 99989 more)"));
  EXPECT_LT(report.call_findings[0].message.size(), 400u);
}

TEST_F(ServiceCheck, AnApiServerWithoutEndpointSlicesIsANote) {
  client.Put(kube::kServices, Service("hook", {{{"port", 443}}}));
  client.InjectFailure(Verb::kList, kube::kEndpointSlices,
                       Error(ErrorCode::kNotFound,
                             "the server could not find the requested "
                             "resource"));
  CheckReport report = Report();
  ASSERT_TRUE(CheckServices(client, report).has_value());
  EXPECT_THAT(report.call_findings, IsEmpty());
  ASSERT_THAT(report.notes, SizeIs(1));
  EXPECT_THAT(report.notes[0], HasSubstr("could not read the EndpointSlices of service/demo/hook"));
}

TEST_F(ServiceCheck, AnExternalNameServiceHasNoPortsOrEndpointsToCheck) {
  client.Put(kube::kServices, Service("hook", {}, "ExternalName"));
  CheckReport report = Report();
  ASSERT_TRUE(CheckServices(client, report).has_value());
  EXPECT_THAT(report.call_findings, IsEmpty());
  EXPECT_EQ(client.CountOf(Verb::kList, kube::kEndpointSlices), 0);
}

TEST_F(ServiceCheck, AForbiddenReadIsANoteAndOtherFailuresAreErrors) {
  client.InjectFailure(Verb::kGet, kube::kServices,
                       Error(ErrorCode::kPermissionDenied, "services \"hook\" is forbidden"));
  CheckReport report = Report();
  ASSERT_TRUE(CheckServices(client, report).has_value());
  EXPECT_THAT(report.call_findings, IsEmpty());
  ASSERT_THAT(report.notes, SizeIs(1));
  EXPECT_THAT(report.notes[0], HasSubstr("could not read service/demo/hook"));

  client.Put(kube::kServices, Service("hook", {{{"port", 443}}}));
  client.InjectFailure(Verb::kList, kube::kEndpointSlices,
                       Error(ErrorCode::kPermissionDenied, "endpointslices is forbidden"));
  CheckReport sliced = Report();
  ASSERT_TRUE(CheckServices(client, sliced).has_value());
  ASSERT_THAT(sliced.notes, SizeIs(1));
  EXPECT_THAT(sliced.notes[0], HasSubstr("the EndpointSlices of service/demo/hook"));

  client.InjectFailure(Verb::kGet, kube::kServices, Error(ErrorCode::kUnavailable, "down"));
  CheckReport failed = Report();
  auto status = CheckServices(client, failed);
  ASSERT_FALSE(status.has_value());
  EXPECT_THAT(status.error().message(), HasSubstr("get service/demo/hook"));
}

// --- which entries may fail closed -------------------------------------------------------

// A configuration "hook" whose entries a (port 443), b (port 9999) and c (a URL) have Ignore,
// and d has Fail.
TargetObject Closing() {
  return Vwc("hook",
             {WebhookEntry("a.example.com", kNs).Service(kNs, "hook").FailurePolicy("Ignore"),
              WebhookEntry("b.example.com", kNs).Service(kNs, "hook", 9999).FailurePolicy("Ignore"),
              WebhookEntry("c.example.com", kNs)
                  .Url("https://hook.example.com/validate")
                  .FailurePolicy("Ignore"),
              WebhookEntry("d.example.com", kNs).Service(kNs, "gone")});
}

TEST(JudgeClosable, OnlyEntriesWithIgnoreThatTheApiServerCanCallMayFailClosed) {
  FakeClient client;
  client.Put(kube::kServices, Service("hook", {{{"port", 443}}}));
  client.Put(kube::kEndpointSlices,
             Slice("hook", {{{"addresses", {"10.244.0.1"}}, {"conditions", {{"ready", true}}}}},
                   Json::array({{{"port", 9443}}})));
  const pki::CertificateInfo leaf = Leaf({"hook.demo.svc", "hook.example.com"});
  auto closable = JudgeClosable(client, {Closing()}, &leaf);
  ASSERT_TRUE(closable.has_value()) << closable.error().message();
  const std::string object = "validatingwebhookconfiguration/hook";
  EXPECT_TRUE(closable->Closable(object, "a.example.com"));
  EXPECT_FALSE(closable->Closable(object, "b.example.com"));  // the Service has no port 9999
  EXPECT_TRUE(closable->Closable(object, "c.example.com"));   // a URL: its name alone
  EXPECT_FALSE(closable->Closable(object, "d.example.com"));  // Fail already: not judged
  EXPECT_EQ(closable->kept, 1u);
  EXPECT_THAT(closable->findings,
              ElementsAre(IsFinding(FindingCode::kServicePortMissing, "service/demo/hook")));
  // Service "gone" is called only by an entry that already fails closed: never read.
  EXPECT_EQ(client.CountOf(Verb::kGet, kube::kServices), 1);

  // With the entries closed, nothing is read at all.
  client.ClearRequests();
  Json closed = Closing().object;
  for (Json& entry : closed["webhooks"]) {
    entry["failurePolicy"] = "Fail";
  }
  auto none =
      JudgeClosable(client, {{TargetKind::kValidatingWebhookConfiguration, "hook", closed}}, &leaf);
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->kept, 0u);
  EXPECT_EQ(client.ReadCount(), 0);
}

TEST(JudgeClosable, NoReadyEndpointANameNotCoveredOrAnUnreadableServiceKeepIgnore) {
  FakeClient client;
  client.Put(kube::kServices, Service("hook", {{{"port", 443}, {"port", 9999}}}));
  client.Put(kube::kEndpointSlices,
             Slice("hook", {{{"addresses", {"10.244.0.1"}}, {"conditions", {{"ready", false}}}}},
                   Json::array({{{"port", 9443}}})));
  const pki::CertificateInfo leaf = Leaf({"hook.demo.svc"});  // not hook.example.com
  auto closable = JudgeClosable(client, {Closing()}, &leaf);
  ASSERT_TRUE(closable.has_value());
  EXPECT_TRUE(closable->entries.empty());
  EXPECT_EQ(closable->kept, 3u);

  client.InjectFailure(Verb::kGet, kube::kServices,
                       Error(ErrorCode::kPermissionDenied, "services \"hook\" is forbidden"));
  auto refused = JudgeClosable(client, {Closing()}, nullptr);
  ASSERT_TRUE(refused.has_value());
  EXPECT_FALSE(refused->Closable("validatingwebhookconfiguration/hook", "a.example.com"));
  EXPECT_TRUE(refused->Closable("validatingwebhookconfiguration/hook", "c.example.com"));
  ASSERT_THAT(refused->notes, SizeIs(1));
  EXPECT_THAT(refused->notes[0], HasSubstr("could not read service/demo/hook"));
}

TEST(FailClosed, WithAJudgementOnlyTheClosableEntriesGetFail) {
  FakeClient client;
  client.Put(kube::kValidatingWebhookConfigurations, Closing().object);
  client.Put(kube::kServices, Service("hook", {{{"port", 443}}}));
  client.Put(kube::kEndpointSlices,
             Slice("hook", {{{"addresses", {"10.244.0.1"}}, {"conditions", {{"ready", true}}}}},
                   Json::array({{{"port", 9443}}})));
  const std::vector<TargetObject> targets = {
      {TargetKind::kValidatingWebhookConfiguration, "hook",
       *client.Object(kube::kValidatingWebhookConfigurations, "", "hook")}};
  auto closable = JudgeClosable(client, targets, nullptr);
  ASSERT_TRUE(closable.has_value());
  auto closed = FailClosed(client, targets, &*closable);
  ASSERT_TRUE(closed.has_value()) << closed.error().message();
  EXPECT_EQ(closed->entries, 2);
  const Json stored = *client.Object(kube::kValidatingWebhookConfigurations, "", "hook");
  EXPECT_EQ(stored["webhooks"][0]["failurePolicy"], "Fail");
  EXPECT_EQ(stored["webhooks"][1]["failurePolicy"], "Ignore");
  EXPECT_EQ(stored["webhooks"][2]["failurePolicy"], "Fail");
}

// --- failurePolicy once ready -------------------------------------------------------------

TEST(FailClosed, IgnoreBecomesFailAndASecondRunWritesNothing) {
  FakeClient client;
  client.Put(
      kube::kValidatingWebhookConfigurations,
      WebhookConfiguration("hook", {WebhookEntry("a.example.com", kNs).FailurePolicy("Ignore"),
                                    WebhookEntry("b.example.com", kNs)}));
  client.Put(
      kube::kCustomResourceDefinitions,
      ConversionCrd("widgets.example.com", {{"service", {{"namespace", kNs}, {"name", "c"}}}}));
  const auto read = [&] {
    return std::vector<TargetObject>{
        {TargetKind::kValidatingWebhookConfiguration, "hook",
         *client.Object(kube::kValidatingWebhookConfigurations, "", "hook")},
        {TargetKind::kCustomResourceDefinition, "widgets.example.com",
         *client.Object(kube::kCustomResourceDefinitions, "", "widgets.example.com")}};
  };
  auto closed = FailClosed(client, read());
  ASSERT_TRUE(closed.has_value()) << closed.error().message();
  EXPECT_EQ(closed->entries, 1);
  EXPECT_THAT(closed->patched, ElementsAre("validatingwebhookconfiguration/hook"));
  const Json stored = *client.Object(kube::kValidatingWebhookConfigurations, "", "hook");
  EXPECT_EQ(stored["webhooks"][0]["failurePolicy"], "Fail");
  EXPECT_EQ(stored["webhooks"][1]["failurePolicy"], "Fail");

  client.ClearRequests();
  auto again = FailClosed(client, read());
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->entries, 0);
  EXPECT_EQ(client.WriteCount(), 0);
}

TEST(FailClosed, AConfigurationCarryingTheHoldIsLeftAsItIs) {
  FakeClient client;
  Json held =
      WebhookConfiguration("hook", {WebhookEntry("a.example.com", kNs).FailurePolicy("Ignore")});
  held["metadata"]["annotations"] = {{kHoldFailurePolicyAnnotation, "incident 4711"}};
  client.Put(kube::kValidatingWebhookConfigurations, held);
  client.Put(
      kube::kMutatingWebhookConfigurations,
      WebhookConfiguration("m", {WebhookEntry("m.example.com", kNs).FailurePolicy("Ignore")}));
  const std::vector<TargetObject> targets{
      {TargetKind::kValidatingWebhookConfiguration, "hook",
       *client.Object(kube::kValidatingWebhookConfigurations, "", "hook")},
      {TargetKind::kMutatingWebhookConfiguration, "m",
       *client.Object(kube::kMutatingWebhookConfigurations, "", "m")}};
  EXPECT_THAT(FailurePolicyHolds(targets), ElementsAre("validatingwebhookconfiguration/hook"));
  client.ClearRequests();
  auto closed = FailClosed(client, targets);
  ASSERT_TRUE(closed.has_value()) << closed.error().message();
  EXPECT_THAT(closed->held, ElementsAre("validatingwebhookconfiguration/hook"));
  EXPECT_THAT(closed->patched, ElementsAre("mutatingwebhookconfiguration/m"));
  EXPECT_EQ(client.Object(kube::kValidatingWebhookConfigurations, "", "hook")
                ->at("webhooks")[0]["failurePolicy"],
            "Ignore");
  EXPECT_EQ(client.CountOf(Verb::kPatch, kube::kValidatingWebhookConfigurations), 0);
}

TEST(FailClosed, AHoldPutOnAfterTheReadIsHonoured) {
  FakeClient client;
  Json open =
      WebhookConfiguration("hook", {WebhookEntry("a.example.com", kNs).FailurePolicy("Ignore")});
  client.Put(kube::kValidatingWebhookConfigurations, open);
  const TargetObject stale{TargetKind::kValidatingWebhookConfiguration, "hook",
                           *client.Object(kube::kValidatingWebhookConfigurations, "", "hook")};
  // An operator annotates the configuration between certctl's read and its patch.
  open["metadata"]["annotations"] = {{kHoldFailurePolicyAnnotation, ""}};
  client.Put(kube::kValidatingWebhookConfigurations, open);
  auto closed = FailClosed(client, {stale});
  ASSERT_TRUE(closed.has_value()) << closed.error().message();
  EXPECT_EQ(closed->entries, 0);
  EXPECT_EQ(client.Object(kube::kValidatingWebhookConfigurations, "", "hook")
                ->at("webhooks")[0]["failurePolicy"],
            "Ignore");
}

TEST(FailClosed, AnEntryMovedMeanwhileIsReadAgainAndStillClosed) {
  FakeClient client;
  client.Put(
      kube::kValidatingWebhookConfigurations,
      WebhookConfiguration("hook", {WebhookEntry("a.example.com", kNs).FailurePolicy("Ignore"),
                                    WebhookEntry("b.example.com", kNs).FailurePolicy("Ignore")}));
  const TargetObject stale{TargetKind::kValidatingWebhookConfiguration, "hook",
                           *client.Object(kube::kValidatingWebhookConfigurations, "", "hook")};
  // Someone reorders the entries after certctl read them: the tests fail, it reads again.
  client.Put(
      kube::kValidatingWebhookConfigurations,
      WebhookConfiguration("hook", {WebhookEntry("b.example.com", kNs).FailurePolicy("Ignore"),
                                    WebhookEntry("c.example.com", kNs).FailurePolicy("Fail"),
                                    WebhookEntry("a.example.com", kNs).FailurePolicy("Ignore")}));
  auto closed = FailClosed(client, {stale});
  ASSERT_TRUE(closed.has_value()) << closed.error().message();
  EXPECT_EQ(closed->entries, 2);
  const Json stored = *client.Object(kube::kValidatingWebhookConfigurations, "", "hook");
  for (const Json& webhook : stored["webhooks"]) {
    EXPECT_EQ(webhook["failurePolicy"], "Fail") << webhook["name"];
  }
}

TEST_F(ServiceCheck, WaitingForAReadyEndpointLooksLessOftenAsTheWaitGoesOn) {
  client.Put(kube::kServices, Service("hook", {{{"port", 443}}}));
  client.Put(kube::kEndpointSlices,
             Slice("hook", {{{"addresses", {"10.244.0.1"}}, {"conditions", {{"ready", false}}}}}));
  const certctl::testing::FakeClock clock;
  const TargetObject target = Vwc(
      "hook", {WebhookEntry("a.example.com", kNs).Service(kNs, "hook").FailurePolicy("Ignore")});
  auto judged =
      JudgeClosableUntil(client, {target}, nullptr, clock.Now() + std::chrono::minutes(2), clock);
  ASSERT_TRUE(judged.has_value()) << judged.error().message();
  EXPECT_EQ(judged->kept, 1);
  // 0.5 s, then twice as long each time up to 8 s: 20 looks in two minutes, not 120.
  using std::chrono::milliseconds;
  ASSERT_GE(clock.sleeps().size(), 6U);
  EXPECT_THAT(std::vector<milliseconds>(clock.sleeps().begin(), clock.sleeps().begin() + 6),
              ElementsAre(milliseconds(500), milliseconds(1000), milliseconds(2000),
                          milliseconds(4000), milliseconds(8000), milliseconds(8000)));
  EXPECT_EQ(client.CountOf(Verb::kGet, kube::kServices), 20);
}

}  // namespace
}  // namespace callable_test
}  // namespace certctl::controller
