#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/certctl_cli.h"
#include "support/temp_dir.h"

namespace certctl::testing {
namespace usage_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(Usage, UnknownFlagIsOneLineAndExitTwo) {
  const auto result = RunCertctl({"check", "--no-such-flag"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(CountLines(result.err), 1) << result.err;
  EXPECT_THAT(result.err, HasSubstr("--no-such-flag"));
}

TEST(Usage, MissingSubcommandAndUnknownSubcommandExitTwo) {
  const auto missing = RunCertctl({});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err,
            "certctl: a command is required: one of generate, check, wait, job, run, controller, "
            "rotate, audit, version (see 'certctl --help')\n");
  const auto unknown = RunCertctl({"frobnicate"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_EQ(unknown.err, "certctl: unknown command \"frobnicate\" (see 'certctl --help')\n");
}

TEST(Usage, AMisspeltCommandOrFlagIsNamedWithTheNearestOne) {
  const auto command = RunCertctl({"chek"});
  EXPECT_EQ(command.exit_code, 2);
  EXPECT_EQ(command.err,
            "certctl: unknown command \"chek\"; did you mean check? (see 'certctl --help')\n");
  const auto flag = RunCertctl({"check", "--servce", "foo"});
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_EQ(flag.err,
            "certctl check: unknown flag --servce; did you mean --service? (see "
            "'certctl check --help')\n");
  const auto argument = RunCertctl({"check", "--service", "hook", "extra"});
  EXPECT_EQ(argument.exit_code, 2);
  EXPECT_EQ(argument.err,
            "certctl check: unexpected argument \"extra\": check takes only flags "
            "(see 'certctl check --help')\n");
}

TEST(Usage, UnitsBelowASecondAndWeeksAreRefusedByName) {
  const auto ms =
      RunCertctl({"generate", "--service", "hook", "-o", "secret", "--cert-validity", "90ms"});
  EXPECT_EQ(ms.exit_code, 2);
  EXPECT_EQ(CountLines(ms.err), 1) << ms.err;
  EXPECT_THAT(ms.err, HasSubstr("--cert-validity: invalid duration \"90ms\": milliseconds (ms) "
                                "are not supported; the shortest unit is s (seconds)"));
  const auto weeks = RunCertctl({"check", "--renew-before", "2w"});
  EXPECT_EQ(weeks.exit_code, 2);
  EXPECT_THAT(weeks.err, HasSubstr("weeks (w) are not a unit; write days, e.g. 14d"));
}

TEST(Usage, MinutesRightAfterYearsAreWarnedAbout) {
  const auto result = RunCertctl(
      {"generate", "--service", "hook", "-n", "infra", "-o", "secret", "--cert-validity", "1y6m"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.err, HasSubstr("warning --cert-validity: \"1y6m\" is 1 year and 6 minutes: "
                                    "m is minutes, not months"));
  const auto clear = RunCertctl({"generate", "--service", "hook", "-n", "infra", "-o", "secret",
                                 "--cert-validity", "1y180d"});
  EXPECT_THAT(clear.err, Not(HasSubstr("warning")));
}

TEST(Usage, MissingRequiredFlagExitsTwo) {
  const auto result = RunCertctl({"wait"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("--cert-dir"));
}

TEST(Usage, DurationsBeyondAHundredYearsAreUsageErrorsOnOneLine) {
  // Each once overflowed: certificates that ended in 1678, waits that gave up at once.
  const std::vector<std::vector<std::string>> commands = {
      {"generate", "--service", "hook", "-o", "secret", "--cert-validity", "236y"},
      {"generate", "--service", "hook", "-o", "secret", "--ca-validity", "236y"},
      {"job", "--service", "hook", "--validating-webhook", "hook", "--cert-validity", "236y"},
      {"job", "--service", "hook", "--validating-webhook", "hook", "--wait-for-targets", "300y"},
      {"wait", "--cert-dir", "/nonexistent", "--timeout", "300y"},
      {"check", "--renew-before", "101y"},
  };
  for (const auto& args : commands) {
    const auto result = RunCertctl(args);
    EXPECT_EQ(result.exit_code, 2) << args[0] << " " << args.back() << ": " << result.err;
    EXPECT_EQ(CountLines(result.err), 1) << result.err;
    EXPECT_THAT(result.err, HasSubstr("longer than the maximum of 100y"));
    EXPECT_TRUE(result.out.empty()) << result.out;
  }
}

TEST(Usage, RunRefusesBadFlagsBeforeTouchingTheCluster) {
  // No kubeconfig exists here: each of these must fail on its flags alone.
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"run", "--service", "hook"}, "a target is needed"},
      {{"run", "--service", "hook", "--validating-webhook", "hook", "--health-addr", "8081"},
       "--health-addr: invalid listen address \"8081\""},
      {{"run", "--service", "hook", "--validating-webhook", "hook", "--metrics-addr", ":99999"},
       "--metrics-addr: invalid listen address \":99999\""},
      {{"run", "--service", "hook", "--validating-webhook", "hook", "--cert-validity", "20d"},
       "must be longer than --renew-before"},
      {{"run", "--service", "hook", "--validating-webhook", "hook", "--resync", "0s"},
       "must be positive"},
      {{"run", "--service", "hook", "--webhook-selector", "  "},
       "a blank label selector would match every webhook configuration"},
      {{"run", "--service", "hook", "--webhook-selector", ""},
       "a blank label selector would match every webhook configuration"},
  };
  ProcessOptions no_cluster;
  no_cluster.extra_env["KUBECONFIG"] = "/nonexistent";
  for (const auto& [args, message] : cases) {
    const auto result = RunCertctl(args, no_cluster);
    EXPECT_EQ(result.exit_code, 2) << result.err;
    EXPECT_EQ(CountLines(result.err), 1) << result.err;
    EXPECT_THAT(result.err, HasSubstr(message));
  }
}

TEST(Usage, HelpExitsZeroAndListsCommands) {
  const auto top = RunCertctl({"--help"});
  EXPECT_EQ(top.exit_code, 0);
  for (const char* command : {"generate", "check", "wait", "job", "run", "version"}) {
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
}  // namespace usage_test
}  // namespace certctl::testing
