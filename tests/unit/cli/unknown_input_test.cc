#include "cli/unknown_input.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace certctl::cli {
namespace unknown_input_test {
namespace {

const std::vector<std::string> kCommands = {"generate", "check",  "wait",   "job",
                                            "run",      "rotate", "version"};

TEST(Nearest, FindsTyposSwapsAndAbbreviations) {
  EXPECT_EQ(Nearest("chek", kCommands).value_or(""), "check");
  EXPECT_EQ(Nearest("chekc", kCommands).value_or(""), "check");
  EXPECT_EQ(Nearest("gen", kCommands).value_or(""), "generate");
  EXPECT_EQ(Nearest("rotat", kCommands).value_or(""), "rotate");
  EXPECT_EQ(Nearest("--servce", {"--service", "--secret", "--namespace"}).value_or(""),
            "--service");
  EXPECT_EQ(Nearest("-servce", {"--service"}).value_or(""), "--service");
}

TEST(Nearest, SuggestsNothingFarAway) {
  EXPECT_FALSE(Nearest("frobnicate", kCommands).has_value());
  EXPECT_FALSE(Nearest("xyz", kCommands).has_value());
  EXPECT_FALSE(Nearest("", kCommands).has_value());
  EXPECT_FALSE(Nearest("--", {"--service"}).has_value());
}

class DescribeUnknownInputTest : public ::testing::Test {
 protected:
  DescribeUnknownInputTest() {
    app_.add_option("--log-level", level_);
    CLI::App* check = app_.add_subcommand("check");
    check->add_option("--service", service_);
    check->add_option("-n,--namespace", namespace_);
    check->add_option("--dns-name", names_);
    check->add_flag("--force", force_);
    CLI::App* wait = app_.add_subcommand("wait");
    wait->add_option("command", command_);
  }

  std::string Describe(const std::vector<std::string>& args) const {
    return DescribeUnknownInput(app_, args).value_or("<nothing>");
  }

  CLI::App app_;
  std::string level_, service_, namespace_;
  std::vector<std::string> names_, command_;
  bool force_ = false;
};

TEST_F(DescribeUnknownInputTest, NamesAnUnknownCommandWithTheNearest) {
  EXPECT_EQ(Describe({"chek"}), "unknown command \"chek\"; did you mean check?");
  EXPECT_EQ(Describe({"--log-level", "debug", "chek"}),
            "unknown command \"chek\"; did you mean check?");
  EXPECT_EQ(Describe({"frobnicate"}), "unknown command \"frobnicate\"");
  EXPECT_EQ(Describe({}), "a command is required: one of check, wait");
}

TEST_F(DescribeUnknownInputTest, NamesAnUnknownFlagWithTheNearest) {
  EXPECT_EQ(Describe({"check", "--servce", "foo"}),
            "unknown flag --servce; did you mean --service?");
  EXPECT_EQ(Describe({"check", "--servce=foo"}), "unknown flag --servce; did you mean --service?");
  EXPECT_EQ(Describe({"check", "--log-levl", "x"}),
            "unknown flag --log-levl; did you mean --log-level?");
  EXPECT_EQ(Describe({"--nope", "check"}), "unknown flag --nope");
}

TEST_F(DescribeUnknownInputTest, SkipsValuesAndWhatFollowsTheSeparator) {
  EXPECT_EQ(Describe({"check", "--service", "chek", "-n", "ns", "-nns", "--force"}), "<nothing>");
  EXPECT_EQ(Describe({"check", "--dns-name", "a", "b", "--force"}), "<nothing>");
  EXPECT_EQ(Describe({"check", "--log-level", "debug"}), "<nothing>");
  EXPECT_EQ(Describe({"wait", "--", "ls", "--bogus"}), "<nothing>");
  EXPECT_EQ(Describe({"wait", "anything"}), "<nothing>");
  EXPECT_EQ(Describe({"check", "--force", "extra"}),
            "unexpected argument \"extra\": check takes only flags");
}

}  // namespace
}  // namespace unknown_input_test
}  // namespace certctl::cli
