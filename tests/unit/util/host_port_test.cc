#include "certctl/util/host_port.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace certctl {
namespace host_port_test {
namespace {

using ::testing::HasSubstr;

TEST(HostPort, ParsesAndFormatsBackTheFormsUsersWrite) {
  for (const char* text : {"127.0.0.1:9443", "[::1]:9443", "localhost:80", ":8081"}) {
    const auto parsed = ParseHostPort(text, "serving address");
    ASSERT_TRUE(parsed) << text;
    EXPECT_EQ(FormatHostPort(*parsed), text);
  }
  EXPECT_EQ(ParseHostPort("[::1]:9443", "x").value().host, "::1");
}

TEST(HostPort, ErrorsNameWhatTheAddressIsFor) {
  const auto parsed = ParseHostPort("9443", "serving address");
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(parsed.error().message(), HasSubstr("invalid serving address \"9443\""));
  EXPECT_FALSE(ParseHostPort("::1:9443", "x"));
  EXPECT_FALSE(ParseHostPort("host:65536", "x"));
  EXPECT_FALSE(ParseHostPort("host:", "x"));
}

}  // namespace
}  // namespace host_port_test
}  // namespace certctl
