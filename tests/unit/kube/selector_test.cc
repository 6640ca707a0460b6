#include "certctl/kube/selector.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace certctl::kube {
namespace selector_test {
namespace {

using ::testing::HasSubstr;

class ValidSelector : public ::testing::TestWithParam<std::string> {};

TEST_P(ValidSelector, Passes) {
  auto valid = ValidateLabelSelector(GetParam());
  EXPECT_TRUE(valid) << valid.error().message();
}

INSTANTIATE_TEST_SUITE_P(LabelSelector, ValidSelector,
                         ::testing::Values("", "app", "!app", "app=hook", "app==hook", "app!=hook",
                                           "app=", "app in (a,b)", "app notin (a, b )",
                                           " tier in (x) , app = hook ", "example.com/inject=yes",
                                           "certctl.io/rotate", "a.b-c_d=e.f-g_h", "n>3", "n<10",
                                           "app in (a,)"));

struct Bad {
  std::string selector;
  std::string says;
};

class InvalidSelector : public ::testing::TestWithParam<Bad> {};

TEST_P(InvalidSelector, IsAUsageErrorSayingWhy) {
  auto valid = ValidateLabelSelector(GetParam().selector);
  ASSERT_FALSE(valid) << GetParam().selector;
  EXPECT_EQ(valid.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(valid.error().message(), HasSubstr("invalid label selector"));
  EXPECT_THAT(valid.error().message(), HasSubstr(GetParam().says));
}

INSTANTIATE_TEST_SUITE_P(
    LabelSelector, InvalidSelector,
    ::testing::Values(Bad{"a=b,", "a key is missing"}, Bad{"app in (a", "expected ')'"},
                      Bad{"app in ()", "is empty"}, Bad{"app in a", "expected '('"},
                      Bad{"app has x", "unknown operator \"has\""},
                      Bad{"-app=x", "not a valid label key"},
                      Bad{"app=x y", "expected ',' between requirements"},
                      Bad{"app=-x", "not a valid label value"}, Bad{"n>three", "whole number"},
                      Bad{"Example.com/x=y", "not a valid label key"},
                      Bad{std::string(64, 'a') + "=b", "not a valid label key"}));

TEST(LabelSelector, OnlyASelectorWithoutRequirementsSelectsEverything) {
  for (const char* blank : {"", " ", "   "}) {
    EXPECT_TRUE(SelectsEverything(blank)) << '"' << blank << '"';
    EXPECT_TRUE(ValidateLabelSelector(blank)) << '"' << blank << '"';
  }
  for (const char* narrowing : {"app", " app ", "!app", "a=b"}) {
    EXPECT_FALSE(SelectsEverything(narrowing)) << narrowing;
  }
}

}  // namespace
}  // namespace selector_test
}  // namespace certctl::kube
