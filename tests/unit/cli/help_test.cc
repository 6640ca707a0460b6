// Each command's help describes its flags as that command uses them: a command that only
// checks never says it writes, and a flag shared by a writing and a checking command has a
// text of its own in each, unless it means exactly the same to both (listed below).
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/check.h"
#include "cli/generate.h"
#include "cli/job.h"
#include "cli/rotate.h"
#include "cli/run.h"
#include "cli/wait.h"
#include "support/certctl_cli.h"

namespace certctl::testing {
namespace help_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Every command as certctl builds it, read back from CLI11 rather than from the help text.
class Commands {
 public:
  Commands() {
    AddGenerateCommand(app_, generate_);
    AddCheckCommand(app_, check_);
    AddWaitCommand(app_, wait_);
    AddJobCommand(app_, job_);
    AddRunCommand(app_, run_);
    AddRotateCommand(app_, rotate_);
  }

  // Flag ("-n,--namespace", "--service") to its description.
  std::map<std::string, std::string> FlagHelp(const std::string& command) const {
    std::map<std::string, std::string> help;
    for (const CLI::Option* option : app_.get_subcommand(command)->get_options()) {
      if (!option->get_positional()) {
        help[option->get_name()] = option->get_description();
      }
    }
    return help;
  }

 private:
  CLI::App app_;
  cli::GenerateOptions generate_;
  cli::CheckOptions check_;
  cli::WaitOptions wait_;
  cli::JobOptions job_;
  cli::RunOptions run_;
  cli::RotateOptions rotate_;
};

std::map<std::string, std::string> FlagHelp(const std::string& command) {
  static const Commands commands;
  return commands.FlagHelp(command);
}

const std::vector<std::string> kWritingCommands = {"generate", "job", "run", "rotate"};
const std::vector<std::string> kCheckingCommands = {"check", "wait"};

// Flags that mean the same thing to every command that has them.
const std::set<std::string> kSameMeaning = {
    "--help",    "--help-all",        "--cluster-domain", "--kubeconfig",
    "--context", "--request-timeout", "--kube-api-qps",   "--kube-api-burst",
};

TEST(Help, EveryCommandHasFlagsWithDescriptions) {
  for (const auto& commands : {kWritingCommands, kCheckingCommands}) {
    for (const std::string& command : commands) {
      const auto help = FlagHelp(command);
      EXPECT_GT(help.size(), 3u) << command;
      for (const auto& [flag, text] : help) {
        EXPECT_FALSE(text.empty()) << command << " " << flag;
      }
    }
  }
}

TEST(Help, ASharedFlagIsDescribedForEachCommandUnlessItMeansTheSame) {
  for (const std::string& checking : kCheckingCommands) {
    const auto checks = FlagHelp(checking);
    for (const std::string& writing : kWritingCommands) {
      const auto writes = FlagHelp(writing);
      for (const auto& [flag, text] : checks) {
        if (!writes.contains(flag) || kSameMeaning.contains(flag)) {
          continue;
        }
        EXPECT_NE(text, writes.at(flag))
            << flag << " has the same help in " << checking << " and " << writing
            << ": say what it does in each, or list it as meaning the same";
      }
    }
  }
}

TEST(Help, ACheckingCommandNeverSaysItWrites) {
  for (const std::string& checking : kCheckingCommands) {
    for (const auto& [flag, text] : FlagHelp(checking)) {
      if (kSameMeaning.contains(flag)) {
        continue;
      }
      for (const char* writing_word :
           {"become", "get the CA bundle", "gets the CA bundle", "Replace", "Create", "inject",
            "for the certificate", "to put in"}) {
        EXPECT_THAT(text, Not(HasSubstr(writing_word))) << checking << " " << flag;
      }
    }
  }
}

TEST(Help, TypeNamesAreShownOnce) {
  for (const char* command : {"check", "job", "run", "rotate"}) {
    const auto result = RunCertctl({command, "--help"});
    EXPECT_THAT(result.out, HasSubstr("--webhook-selector SELECTOR "));
    EXPECT_THAT(result.out, Not(HasSubstr("SELECTOR:SELECTOR")));
  }
}

TEST(Help, TheNamespaceSaysWhereItComesFromForEachCommand) {
  EXPECT_THAT(FlagHelp("generate").at("--namespace"),
              HasSubstr("(default: $POD_NAMESPACE, else \"default\")"));
  EXPECT_THAT(FlagHelp("job").at("--namespace"),
              HasSubstr("else the service account's namespace in a pod, else the kubeconfig "
                        "context's, else \"default\""));
  EXPECT_THAT(FlagHelp("check").at("--namespace"),
              HasSubstr("; with files: $POD_NAMESPACE, else \"default\""));
}

}  // namespace
}  // namespace help_test
}  // namespace certctl::testing
