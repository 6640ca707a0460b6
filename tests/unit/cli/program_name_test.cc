#include "cli/program_name.h"

#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/certctl_cli.h"
#include "support/temp_dir.h"

namespace certctl::testing {
namespace program_name_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const std::vector<std::string> kCommands = {"generate", "check",  "wait",   "job",
                                            "run",      "rotate", "version"};

TEST(ProgramName, KubectlPluginExecutableIsKubectlCertctl) {
  for (const char* argv0 : {"kubectl-certctl", "/usr/local/bin/kubectl-certctl",
                            "/root/.krew/bin/kubectl-certctl", "./kubectl-certctl"}) {
    EXPECT_EQ(cli::ProgramName(argv0), "kubectl certctl") << argv0;
  }
}

TEST(ProgramName, AnyOtherNameIsCertctl) {
  for (const char* argv0 : {"certctl", "/usr/local/bin/certctl", "", "/opt/kubectl-certctl/certctl",
                            "kubectl-certctl-dev", "xkubectl-certctl", "kubectl-certctl/",
                            "kubectl certctl", "/usr/bin/kubectl"}) {
    EXPECT_EQ(cli::ProgramName(argv0), "certctl") << argv0;
  }
}

// The built binary reached through links, as kubectl (kubectl-certctl on PATH) or a user
// (any other name) runs it.
class InvokedAs : public ::testing::Test {
 protected:
  InvokedAs() {
    std::filesystem::create_symlink(CERTCTL_BINARY, dir_ / "kubectl-certctl");
    std::filesystem::create_symlink(CERTCTL_BINARY, dir_ / "certctl");
  }

  ProcessResult Run(const std::string& name, std::vector<std::string> args) const {
    args.insert(args.begin(), (dir_ / name).string());
    ProcessOptions options;
    options.extra_env["KUBECONFIG"] = (dir_ / "no-kubeconfig").string();
    return RunProcess(args, options);
  }

  TempDir dir_;
};

std::string ReplaceAll(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

TEST_F(InvokedAs, PluginHelpSaysKubectlCertctl) {
  const auto top = Run("kubectl-certctl", {"--help"});
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_THAT(top.out, HasSubstr("\nUsage: kubectl certctl [OPTIONS] SUBCOMMAND\n"));
  for (const std::string& command : kCommands) {
    const auto help = Run("kubectl-certctl", {command, "--help"});
    EXPECT_EQ(help.exit_code, 0) << command;
    EXPECT_THAT(help.out, HasSubstr("\nUsage: kubectl certctl " + command + " [OPTIONS]"));
  }
}

TEST_F(InvokedAs, PlainHelpSaysCertctlAndDiffersFromThePluginsOnlyInTheName) {
  const auto top = Run("certctl", {"--help"});
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_THAT(top.out, HasSubstr("\nUsage: certctl [OPTIONS] SUBCOMMAND\n"));
  EXPECT_THAT(top.out, Not(HasSubstr("kubectl certctl")));
  EXPECT_EQ(ReplaceAll(Run("kubectl-certctl", {"--help"}).out, "kubectl certctl", "certctl"),
            top.out);
  for (const std::string& command : kCommands) {
    const auto help = Run("certctl", {command, "--help"});
    EXPECT_EQ(help.exit_code, 0) << command;
    EXPECT_THAT(help.out, HasSubstr("\nUsage: certctl " + command + " [OPTIONS]"));
    EXPECT_THAT(help.out, Not(HasSubstr("kubectl certctl"))) << command;
    const auto plugin = Run("kubectl-certctl", {command, "--help"});
    EXPECT_EQ(ReplaceAll(plugin.out, "kubectl certctl", "certctl"), help.out) << command;
  }
}

TEST_F(InvokedAs, UsageErrorsAndTheirHintNameTheProgram) {
  const auto plugin = Run("kubectl-certctl", {"check", "--bogus"});
  EXPECT_EQ(plugin.exit_code, 2);
  EXPECT_EQ(plugin.err,
            "kubectl certctl check: unknown flag --bogus (see 'kubectl certctl check --help')\n");
  const auto plain = Run("certctl", {"check", "--bogus"});
  EXPECT_EQ(plain.exit_code, 2);
  EXPECT_EQ(plain.err, "certctl check: unknown flag --bogus (see 'certctl check --help')\n");

  const auto unknown = Run("kubectl-certctl", {"frobnicate"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, StartsWith("kubectl certctl: "));
  EXPECT_THAT(unknown.err, HasSubstr("(see 'kubectl certctl --help')"));
}

TEST_F(InvokedAs, CommandMessagesStartWithTheCommandAsTyped) {
  const auto generate = Run("kubectl-certctl", {"generate", "--service", "hook"});
  EXPECT_EQ(generate.exit_code, 2);
  EXPECT_THAT(generate.err, StartsWith("kubectl certctl generate: nothing to do"));
  EXPECT_EQ(CountLines(generate.err), 1) << generate.err;

  // No kubeconfig: check cannot run, and says so as the plugin.
  const auto check = Run("kubectl-certctl", {"check", "--log-level", "off"});
  EXPECT_EQ(check.exit_code, 2);
  EXPECT_THAT(check.err, StartsWith("kubectl certctl check: "));
  const auto plain = Run("certctl", {"check", "--log-level", "off"});
  EXPECT_EQ(plain.exit_code, 2);
  EXPECT_THAT(plain.err, StartsWith("certctl check: "));

  const auto rotate = Run("kubectl-certctl", {"rotate", "--log-level", "off", "--timeout", "1s"});
  EXPECT_NE(rotate.exit_code, 0);
  EXPECT_THAT(rotate.err, StartsWith("kubectl certctl rotate: "));
}

}  // namespace
}  // namespace program_name_test
}  // namespace certctl::testing
