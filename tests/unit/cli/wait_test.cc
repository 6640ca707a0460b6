#include <chrono>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/certctl_cli.h"
#include "support/temp_dir.h"

namespace certctl::testing {
namespace wait_test {
namespace {

using ::testing::HasSubstr;

TEST(WaitCommand, ReturnsAtOnceWhenThePairIsValid) {
  TempDir dir;
  ASSERT_EQ(RunCertctl({"generate", "--service", "hook", "--out-dir", dir.path()}).exit_code, 0);
  const auto result = RunCertctl({"wait", "--cert-dir", dir.path(), "--timeout", "10s"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
}

TEST(WaitCommand, ReturnsOnceAPairAppears) {
  TempDir dir;
  TempDir staging;
  // The pair lands in the watched folder while wait is already polling.
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    RunCertctl({"generate", "--service", "hook", "--out-dir", staging.path()});
    for (const char* name : {"tls.key", "tls.crt", "ca.crt"}) {
      std::filesystem::rename(staging / name, dir / name);
    }
  });
  const auto started = std::chrono::steady_clock::now();
  const auto result = RunCertctl({"wait", "--cert-dir", dir.path(), "--timeout", "30s",
                                  "--interval", "1s", "--service", "hook"});
  writer.join();
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(1400));
  EXPECT_THAT(result.err, HasSubstr("waiting for"));
}

TEST(WaitCommand, TimesOutWithTheLastReason) {
  TempDir dir;
  dir.Write("tls.crt", "garbage");
  const auto result =
      RunCertctl({"wait", "--cert-dir", dir.path(), "--timeout", "1s", "--interval", "1s"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("timed out after 1s"));
  EXPECT_THAT(result.err, HasSubstr((dir / "tls.crt").string()));
}

TEST(WaitCommand, ExecsTheCommandWithItsArguments) {
  TempDir dir;
  ASSERT_EQ(RunCertctl({"generate", "--service", "hook", "--out-dir", dir.path()}).exit_code, 0);
  const auto result = RunCertctl(
      {"wait", "--cert-dir", dir.path(), "--", "sh", "-c", "echo serving $0 $1; exit 7", "a", "b"});
  EXPECT_EQ(result.exit_code, 7) << result.err;
  EXPECT_EQ(result.out, "serving a b\n");
}

TEST(WaitCommand, UnknownCommandFails) {
  TempDir dir;
  ASSERT_EQ(RunCertctl({"generate", "--service", "hook", "--out-dir", dir.path()}).exit_code, 0);
  const auto result =
      RunCertctl({"wait", "--cert-dir", dir.path(), "--", "/nonexistent/webhook-server"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("cannot run /nonexistent/webhook-server"));
}

TEST(WaitCommand, WrongSanKeepsWaiting) {
  TempDir dir;
  ASSERT_EQ(RunCertctl({"generate", "--service", "hook", "--out-dir", dir.path()}).exit_code, 0);
  const auto result = RunCertctl({"wait", "--cert-dir", dir.path(), "--service", "other",
                                  "--timeout", "1s", "--interval", "1s"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("other"));
}

}  // namespace
}  // namespace wait_test
}  // namespace certctl::testing
