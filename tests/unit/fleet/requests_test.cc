#include "certctl/fleet/requests.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace certctl::fleet {
namespace requests_test {
namespace {

using Json = nlohmann::json;
using inject::TargetKind;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Json Service(Json annotations) {
  return {{"metadata", {{"namespace", "team-a"}, {"name", "hook"}, {"annotations", annotations}}}};
}

Json Target(const std::string& name, Json annotations) {
  return {{"metadata", {{"name", name}, {"annotations", annotations}}}};
}

TEST(CertificateRequest, AServiceAsksForASecretInItsNamespaceWithExtraNames) {
  auto reading = ReadCertificateRequest(
      Service({{kServingCertSecretAnnotation, "hook-tls"},
               {kDnsNamesAnnotation, " a.example.com, 10.0.0.1,a.example.com"}}));
  ASSERT_TRUE(reading.request) << reading.problem.value_or("");
  EXPECT_EQ(reading.request->ns, "team-a");
  EXPECT_EQ(reading.request->service, "hook");
  EXPECT_EQ(reading.request->secret, "hook-tls");
  EXPECT_THAT(reading.request->dns_names, ElementsAre("a.example.com", "10.0.0.1"));
  EXPECT_FALSE(reading.problem);
}

TEST(CertificateRequest, AServiceWithoutTheAnnotationAsksForNothing) {
  for (const Json& service : {Service(Json::object()), Json::object(),
                              Service({{kDnsNamesAnnotation, "a.example.com"}})}) {
    auto reading = ReadCertificateRequest(service);
    EXPECT_FALSE(reading.request);
    EXPECT_FALSE(reading.problem);
  }
}

TEST(CertificateRequest, WhatCannotBeHonouredIsToldNamingServiceAndAnnotation) {
  auto bad_secret = ReadCertificateRequest(Service({{kServingCertSecretAnnotation, "Hook_TLS"}}));
  EXPECT_FALSE(bad_secret.request);
  EXPECT_THAT(bad_secret.problem.value_or(""),
              HasSubstr("service/team-a/hook: annotation certctl.io/serving-cert-secret is "
                        "\"Hook_TLS\", not a Secret name"));
  auto bad_name =
      ReadCertificateRequest(Service({{kServingCertSecretAnnotation, "hook-tls"},
                                      {kDnsNamesAnnotation, "ok.example.com,bad name"}}));
  EXPECT_FALSE(bad_name.request);
  EXPECT_THAT(bad_name.problem.value_or(""), HasSubstr("\"bad name\", which is neither"));
  auto not_string = ReadCertificateRequest(Service({{kServingCertSecretAnnotation, 3}}));
  EXPECT_THAT(not_string.problem.value_or(""), HasSubstr("is not a string"));
}

TEST(InjectionRequest, TheCertctlAnnotationNamesNamespaceAndSecret) {
  auto reading =
      ReadInjectionRequest(TargetKind::kValidatingWebhookConfiguration,
                           Target("policy", {{kInjectCaFromAnnotation, "team-a/hook-tls"},
                                             {kFailurePolicyOnceReadyAnnotation, "Fail"}}),
                           false);
  ASSERT_TRUE(reading.request) << reading.problem.value_or("");
  EXPECT_EQ(reading.request->name, "policy");
  EXPECT_EQ(reading.request->secret_ns, "team-a");
  EXPECT_EQ(reading.request->secret, "hook-tls");
  EXPECT_TRUE(reading.request->fail_once_ready);
  EXPECT_STREQ(reading.request->annotation, kInjectCaFromAnnotation);
}

TEST(InjectionRequest, CertManagersAnnotationIsReadOnlyWhenAskedFor) {
  const Json target = Target("conv", {{kCertManagerInjectCaFromSecretAnnotation, "cm/ca"}});
  EXPECT_FALSE(ReadInjectionRequest(TargetKind::kCustomResourceDefinition, target, false).request);
  auto reading = ReadInjectionRequest(TargetKind::kCustomResourceDefinition, target, true);
  ASSERT_TRUE(reading.request);
  EXPECT_STREQ(reading.request->annotation, kCertManagerInjectCaFromSecretAnnotation);
  EXPECT_EQ(reading.request->secret, "ca");
}

TEST(InjectionRequest, AMalformedValueIsToldAndAsksForNothing) {
  for (const std::string value : {"hook-tls", "team-a/", "/hook-tls", "a/b/c", "Team/hook"}) {
    auto reading = ReadInjectionRequest(TargetKind::kMutatingWebhookConfiguration,
                                        Target("m", {{kInjectCaFromAnnotation, value}}), false);
    EXPECT_FALSE(reading.request) << value;
    EXPECT_THAT(reading.problem.value_or(""),
                HasSubstr("mutatingwebhookconfiguration/m: annotation certctl.io/inject-ca-from"))
        << value;
    EXPECT_THAT(reading.problem.value_or(""), HasSubstr("not NAMESPACE/SECRET")) << value;
  }
}

TEST(InjectionRequest, AFailurePolicyAnnotationIsForWebhookConfigurationsAndFailOrIgnore) {
  auto on_crd = ReadInjectionRequest(
      TargetKind::kCustomResourceDefinition,
      Target("c", {{kInjectCaFromAnnotation, "a/b"}, {kFailurePolicyOnceReadyAnnotation, "Fail"}}),
      false);
  EXPECT_THAT(on_crd.problem.value_or(""), HasSubstr("has no failurePolicy"));
  auto bad = ReadInjectionRequest(
      TargetKind::kValidatingWebhookConfiguration,
      Target("v", {{kInjectCaFromAnnotation, "a/b"}, {kFailurePolicyOnceReadyAnnotation, "fail"}}),
      false);
  EXPECT_THAT(bad.problem.value_or(""), HasSubstr("expected Fail or Ignore"));
}

TEST(DirectInjection, OnlyTheStringTrueAllowsIt) {
  EXPECT_TRUE(AllowsDirectInjection(Target("s", {{kAllowDirectInjectionAnnotation, "true"}})));
  EXPECT_FALSE(AllowsDirectInjection(Target("s", {{kAllowDirectInjectionAnnotation, "yes"}})));
  EXPECT_FALSE(AllowsDirectInjection(Target("s", Json::object())));
}

}  // namespace
}  // namespace requests_test
}  // namespace certctl::fleet
