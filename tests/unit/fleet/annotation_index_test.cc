#include "certctl/fleet/annotation_index.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace certctl::fleet {
namespace annotation_index_test {
namespace {

using inject::TargetKind;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

CertificateRequest Asks(const std::string& service, const std::string& secret) {
  return {.ns = "team-a", .service = service, .secret = secret, .dns_names = {}, .uid = ""};
}

InjectionRequest Injects(const std::string& name, const std::string& secret) {
  return {.kind = TargetKind::kValidatingWebhookConfiguration,
          .name = name,
          .secret_ns = "team-a",
          .secret = secret,
          .annotation = kInjectCaFromAnnotation,
          .fail_once_ready = false,
          .uid = ""};
}

TEST(AnnotationIndex, EachChangeNamesTheSecretsToReconcile) {
  AnnotationIndex index;
  EXPECT_THAT(index.SetService("team-a/hook", Asks("hook", "hook-tls")),
              ElementsAre("team-a/hook-tls"));
  EXPECT_THAT(index.SetService("team-a/hook", Asks("hook", "hook-tls")), IsEmpty());  // unchanged
  EXPECT_THAT(index.SetService("team-a/hook", Asks("hook", "other-tls")),
              ElementsAre("team-a/hook-tls", "team-a/other-tls"));
  EXPECT_THAT(index.SetService("team-a/hook", std::nullopt), ElementsAre("team-a/other-tls"));
  EXPECT_THAT(index.SetService("team-a/hook", std::nullopt), IsEmpty());
  EXPECT_FALSE(index.Named("team-a/other-tls"));
  EXPECT_EQ(index.service_count(), 0U);
}

TEST(AnnotationIndex, TargetsAreFoundByTheSecretTheyInjectFrom) {
  AnnotationIndex index;
  const std::string policy = "validatingwebhookconfiguration/policy";
  index.SetTarget(policy, Injects("policy", "hook-tls"));
  index.SetTarget("validatingwebhookconfiguration/audit", Injects("audit", "hook-tls"));
  index.SetService("team-a/hook", Asks("hook", "hook-tls"));
  std::vector<std::string> names;
  for (const InjectionRequest& request : index.Injecting("team-a/hook-tls")) {
    names.push_back(request.name);
  }
  EXPECT_THAT(names, ElementsAre("audit", "policy"));
  EXPECT_EQ(index.Issuing("team-a/hook-tls")->service, "hook");
  EXPECT_TRUE(index.Named("team-a/hook-tls"));
  EXPECT_FALSE(index.Named("team-a/unnamed"));
  EXPECT_THAT(index.SetTarget(policy, std::nullopt), ElementsAre("team-a/hook-tls"));
  EXPECT_EQ(index.Injecting("team-a/hook-tls").size(), 1U);
  EXPECT_THAT(index.Secrets(), ElementsAre("team-a/hook-tls"));
}

TEST(AnnotationIndex, OfServicesAskingForOneSecretTheFirstByNameIssues) {
  AnnotationIndex index;
  index.SetService("team-a/zeta", Asks("zeta", "shared"));
  index.SetService("team-a/alpha", Asks("alpha", "shared"));
  EXPECT_EQ(index.Issuing("team-a/shared")->service, "alpha");
  EXPECT_THAT(index.OutnumberedServices("team-a/shared"), ElementsAre("team-a/zeta"));
  index.SetService("team-a/alpha", std::nullopt);
  EXPECT_EQ(index.Issuing("team-a/shared")->service, "zeta");
  EXPECT_THAT(index.OutnumberedServices("team-a/shared"), IsEmpty());
}

TEST(AnnotationIndex, ARelistForgetsWhatWasNotListedInItsScope) {
  AnnotationIndex index;
  index.SetService("team-a/hook", Asks("hook", "hook-tls"));
  CertificateRequest elsewhere = Asks("other", "other-tls");
  elsewhere.ns = "team-b";
  index.SetService("team-b/other", elsewhere);
  EXPECT_THAT(index.KeepServices("team-a", {}), ElementsAre("team-a/hook-tls"));
  EXPECT_TRUE(index.Named("team-b/other-tls"));  // another namespace's watch answers for it
  EXPECT_THAT(index.KeepServices("", {"team-b/other"}), IsEmpty());
  index.SetTarget("validatingwebhookconfiguration/a", Injects("a", "x"));
  index.SetTarget("validatingwebhookconfiguration/b", Injects("b", "y"));
  EXPECT_THAT(index.KeepTargets(TargetKind::kValidatingWebhookConfiguration,
                                {"validatingwebhookconfiguration/a"}),
              ElementsAre("team-a/y"));
  EXPECT_THAT(index.KeepTargets(TargetKind::kMutatingWebhookConfiguration, {}), IsEmpty());
  const SecretRequests requests = index.RequestsFor("team-a/x");
  EXPECT_TRUE(requests.named());
  EXPECT_EQ(requests.injecting.size(), 1U);
  EXPECT_FALSE(requests.issuing);
}

}  // namespace
}  // namespace annotation_index_test
}  // namespace certctl::fleet
