#include "certctl/util/random.h"

#include <set>

#include <gtest/gtest.h>

namespace certctl {
namespace random_test {
namespace {

TEST(RandomSuffix, IsLowercaseAlphanumericOfTheAskedLengthAndVaries) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string suffix = RandomSuffix();
    ASSERT_EQ(suffix.size(), 8U);
    EXPECT_EQ(suffix.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789"), std::string::npos);
    seen.insert(suffix);
  }
  EXPECT_EQ(seen.size(), 100U);
  EXPECT_EQ(RandomSuffix(20).size(), 20U);
}

}  // namespace
}  // namespace random_test
}  // namespace certctl
