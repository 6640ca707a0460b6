#include "certctl/util/finding.h"

#include <set>

#include <gtest/gtest.h>

#include "certctl/util/result.h"

namespace certctl {
namespace finding_test {
namespace {

TEST(FindingCode, NamesAreStableKebabCaseAndRoundTrip) {
  EXPECT_EQ(FindingCodeName(FindingCode::kExpired), "expired");
  EXPECT_EQ(FindingCodeName(FindingCode::kNotYetValid), "not-yet-valid");
  EXPECT_EQ(FindingCodeName(FindingCode::kCaBundleMismatch), "ca-bundle-mismatch");
  std::set<std::string_view> seen;
  for (int i = 0; i <= static_cast<int>(FindingCode::kServingCertExpiringSoon); ++i) {
    const auto code = static_cast<FindingCode>(i);
    const std::string_view name = FindingCodeName(code);
    EXPECT_NE(name, "unknown");
    EXPECT_TRUE(seen.insert(name).second) << name;
    EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz-"), std::string_view::npos);
    EXPECT_EQ(ParseFindingCode(name), code);
  }
  EXPECT_FALSE(ParseFindingCode("nonsense").has_value());
}

TEST(FindingHelp, NamesEachCodesSectionOnceInTheOrderFound) {
  EXPECT_EQ(FindingHelp(FindingCode::kSanMissing), "docs/troubleshooting.md#san-missing");
  EXPECT_EQ(FindingHelpLine({}), "");
  EXPECT_EQ(
      FindingHelpLine({FindingCode::kExpired, FindingCode::kSanMissing, FindingCode::kExpired}),
      "what to do: docs/troubleshooting.md#expired, docs/troubleshooting.md#san-missing");
}

TEST(Error, WrapKeepsCodeAndPrefixesContext) {
  const Error error(ErrorCode::kConflict, "the object has been modified");
  const Error wrapped = error.Wrap("update secret/x");
  EXPECT_EQ(wrapped.code(), ErrorCode::kConflict);
  EXPECT_EQ(wrapped.message(), "update secret/x: the object has been modified");
  EXPECT_EQ(ErrorCodeName(ErrorCode::kUnavailable), "unavailable");
}

}  // namespace
}  // namespace finding_test
}  // namespace certctl
