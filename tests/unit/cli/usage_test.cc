#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/certctl_cli.h"
#include "support/temp_dir.h"

namespace certctl::testing {
namespace {

using ::testing::HasSubstr;

TEST(Usage, UnknownFlagIsOneLineAndExitTwo) {
  const auto result = RunCertctl({"check", "--no-such-flag"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(CountLines(result.err), 1) << result.err;
  EXPECT_THAT(result.err, HasSubstr("--no-such-flag"));
}

TEST(Usage, MissingSubcommandAndUnknownSubcommandExitTwo) {
  EXPECT_EQ(RunCertctl({}).exit_code, 2);
  const auto unknown = RunCertctl({"frobnicate"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_EQ(CountLines(unknown.err), 1) << unknown.err;
}

TEST(Usage, MissingRequiredFlagExitsTwo) {
  const auto result = RunCertctl({"wait"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("--cert-dir"));
}

TEST(Usage, HelpExitsZeroAndListsCommands) {
  const auto top = RunCertctl({"--help"});
  EXPECT_EQ(top.exit_code, 0);
  for (const char* command : {"generate", "check", "wait", "version"}) {
    EXPECT_THAT(top.out, HasSubstr(command));
  }
  const auto sub = RunCertctl({"generate", "--help"});
  EXPECT_EQ(sub.exit_code, 0);
  EXPECT_THAT(sub.out, HasSubstr("--key-type"));
  EXPECT_THAT(sub.out, HasSubstr("--cert-validity"));
}

TEST(Usage, VersionNamesOpenssl) {
  const auto text = RunCertctl({"version"});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_THAT(text.out, HasSubstr("certctl "));
  EXPECT_THAT(text.out, HasSubstr("OpenSSL 3"));
  const auto json = RunCertctl({"version", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0);
  const auto document = nlohmann::json::parse(json.out);
  EXPECT_TRUE(document.contains("version"));
  EXPECT_TRUE(document.contains("commit"));
}

TEST(Usage, JsonLogsAreOneObjectPerLineWithoutKeys) {
  TempDir dir;
  const auto result = RunCertctl({"generate", "--service", "hook", "--out-dir", dir.path(),
                                  "--log-format", "json", "--log-level", "debug"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::istringstream lines(result.err);
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    const auto entry = nlohmann::json::parse(line);
    EXPECT_TRUE(entry.contains("time"));
    EXPECT_TRUE(entry["level"] == "info" || entry["level"] == "debug") << line;
    EXPECT_TRUE(entry.contains("msg"));
    ++count;
  }
  EXPECT_GE(count, 1);
  EXPECT_THAT(result.err, ::testing::Not(HasSubstr("PRIVATE KEY")));
}

TEST(Usage, BadLogLevelExitsTwo) {
  EXPECT_EQ(RunCertctl({"version", "--log-level", "loud"}).exit_code, 2);
}

}  // namespace
}  // namespace certctl::testing
