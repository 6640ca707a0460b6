#include "certctl/kube/names.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace certctl::kube {
namespace names_test {
namespace {

using ::testing::HasSubstr;

TEST(ObjectNames, SubdomainsAsTheApiServerAcceptsThem) {
  for (const std::string& name : std::vector<std::string>{
           "a", "0", "webhook-server-cert", "v1beta1.metrics.k8s.io", "policies.example.com",
           "a-b.c-d", std::string(100, 'a'), std::string(253, 'a')}) {
    auto valid = ValidateSubdomainName(name);
    EXPECT_TRUE(valid) << name << ": " << valid.error().message();
  }
}

struct Bad {
  std::string name;
  std::string says;
};

TEST(ObjectNames, ASubdomainThatTheApiServerRefusesIsRefusedSayingWhy) {
  for (const Bad& bad :
       {Bad{"Bad_Name", "contains 'B'"}, Bad{"bad_name", "contains '_'"}, Bad{"", "empty"},
        Bad{std::string(254, 'a'), "254 characters long"}, Bad{"-a", "starts or ends with '-'"},
        Bad{"a-", "starts or ends with '-'"}, Bad{"a.-b", "starts or ends with '-'"},
        Bad{".a", "empty part"}, Bad{"a.", "empty part"}, Bad{"a..b", "empty part"},
        Bad{"a/b", "contains '/'"}, Bad{"a b", "contains ' '"}, Bad{"a\nb", "not printable ASCII"},
        Bad{"b\xc3\xbc", "not printable"}}) {
    auto valid = ValidateSubdomainName(bad.name);
    ASSERT_FALSE(valid) << bad.name;
    EXPECT_EQ(valid.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(valid.error().message(), HasSubstr(bad.says)) << bad.name;
  }
}

TEST(ObjectNames, LabelsAreSubdomainsOfOnePartAndAtMost63Characters) {
  EXPECT_TRUE(ValidateLabelName("kube-system"));
  EXPECT_TRUE(ValidateLabelName(std::string(63, 'a')));
  EXPECT_THAT(ValidateLabelName(std::string(64, 'a')).error().message(),
              HasSubstr("64 characters long"));
  EXPECT_THAT(ValidateLabelName("a.b").error().message(), HasSubstr("contains '.'"));
  EXPECT_THAT(ValidateLabelName("Infra").error().message(), HasSubstr("contains 'I'"));
  EXPECT_THAT(ValidateLabelName("").error().message(), HasSubstr("empty"));
}

}  // namespace
}  // namespace names_test
}  // namespace certctl::kube
