#include "certctl/util/base64.h"

#include <gtest/gtest.h>

namespace certctl {
namespace base64_test {
namespace {

TEST(Base64, EncodesRfc4648Vectors) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foob"), "Zm9vYg==");
  EXPECT_EQ(Base64Encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
}

TEST(Base64, RoundTripsEveryByteValue) {
  std::string all;
  for (int i = 0; i < 256; ++i) {
    all += static_cast<char>(i);
  }
  for (std::size_t length = 0; length <= all.size(); length += 37) {
    const std::string data = all.substr(0, length);
    EXPECT_EQ(Base64Decode(Base64Encode(data)).value(), data);
  }
}

TEST(Base64, RejectsMalformedInput) {
  for (const char* text : {"Zg=", "Zm9v!A==", "Z===", "Zg==Zg==", "=Zg="}) {
    auto decoded = Base64Decode(text);
    ASSERT_FALSE(decoded.has_value()) << text;
    EXPECT_EQ(decoded.error().code(), ErrorCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace base64_test
}  // namespace certctl
