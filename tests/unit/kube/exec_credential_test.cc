#include "kube/exec_credential.h"

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace certctl::kube {
namespace exec_credential_test {
namespace {

namespace fs = std::filesystem;
using certctl::testing::TempDir;
using ::testing::HasSubstr;

constexpr char kCredential[] =
    R"js({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"plugin-token"}})js";

ExecCredential Plugin(const TempDir& dir, const std::string& body) {
  const fs::path script = dir.Write("plugin.sh", "#!/bin/sh\n" + body);
  fs::permissions(script, fs::perms::owner_all);
  return ExecCredential{script.string(), {}, {}, "client.authentication.k8s.io/v1"};
}

// Whether the process is gone: no such process, or a zombie waiting for its new parent.
bool Ended(const std::string& pid) {
  std::ifstream stat("/proc/" + pid + "/stat");
  std::string line;
  if (!std::getline(stat, line)) {
    return true;
  }
  const auto state = line.find(") ");
  return state != std::string::npos && line[state + 2] == 'Z';
}

std::string PidIn(const TempDir& dir, std::string_view file) {
  const std::string content = dir.Read(file);
  return content.substr(0, content.find('\n'));
}

// Kill is asynchronous: give the kernel a moment to finish the group off.
bool EndsSoon(const std::string& pid) {
  for (int attempt = 0; attempt < 200 && !Ended(pid); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return Ended(pid);
}

TEST(ExecPlugin, RunsInAProcessGroupOfItsOwn) {
  TempDir dir;
  const auto exec =
      Plugin(dir, "echo \"$$ $(cut -d' ' -f5 /proc/$$/stat)\" > \"" +
                      (dir.path() / "ids").string() + "\"\necho '" + kCredential + "'\n");
  auto token = RunExecPlugin(exec);
  ASSERT_TRUE(token) << token.error().message();
  EXPECT_EQ(token->token, "plugin-token");
  std::string pid;
  std::string group;
  std::ifstream(dir.path() / "ids") >> pid >> group;
  EXPECT_EQ(pid, group);
}

TEST(ExecPlugin, APluginThatLingersAfterClosingItsOutputIsKilledAtTheDeadline) {
  // The whole credential arrives, then the plugin hangs on: the deadline still holds.
  TempDir dir;
  const auto exec = Plugin(dir, "echo $$ > \"" + (dir.path() / "pid").string() + "\"\necho '" +
                                    kCredential + "'\nexec >&-\nsleep 30\n");
  auto token = RunExecPlugin(exec, std::chrono::milliseconds(500));
  ASSERT_FALSE(token);
  EXPECT_EQ(token.error().code(), ErrorCode::kUnauthenticated);
  EXPECT_THAT(token.error().message(),
              HasSubstr("closed its output but did not exit within 500ms"));
  EXPECT_TRUE(EndsSoon(PidIn(dir, "pid")));
}

TEST(ExecPlugin, ATimeoutKillsWhatThePluginStarted) {
  // The plugin hangs, and a helper it started holds its output open too: both the wait and
  // the helper must end.
  TempDir dir;
  const auto exec =
      Plugin(dir, "sleep 30 &\necho $! > \"" + (dir.path() / "helper").string() + "\"\nsleep 30\n");
  auto token = RunExecPlugin(exec, std::chrono::seconds(1));
  ASSERT_FALSE(token);
  EXPECT_THAT(token.error().message(), HasSubstr("did not finish within 1s"));
  EXPECT_TRUE(EndsSoon(PidIn(dir, "helper")));
}

// Generous: the point is not to wait for the deadline, not how fast a loaded machine is.
constexpr auto kDeadline = std::chrono::seconds(20);
constexpr auto kWellWithinTheDeadline = std::chrono::seconds(10);

TEST(ExecPlugin, ItsCredentialIsTakenWhenItExitsThoughAHelperHoldsItsOutput) {
  TempDir dir;
  const auto exec = Plugin(dir, "sleep 30 &\necho $! > \"" + (dir.path() / "helper").string() +
                                    "\"\necho '" + kCredential + "'\nexit 0\n");
  const auto started = std::chrono::steady_clock::now();
  auto token = RunExecPlugin(exec, kDeadline);
  EXPECT_LT(std::chrono::steady_clock::now() - started, kWellWithinTheDeadline);
  ASSERT_TRUE(token) << token.error().message();
  EXPECT_EQ(token->token, "plugin-token");
  // The helper, holding output nobody reads any more, is ended with the plugin's group.
  EXPECT_TRUE(EndsSoon(PidIn(dir, "helper")));
}

TEST(ExecPlugin, APluginThatExitsWithoutPrintingWhileAHelperHoldsItsOutputFailsAtOnce) {
  TempDir dir;
  const auto exec =
      Plugin(dir, "sleep 30 &\necho $! > \"" + (dir.path() / "helper").string() + "\"\nexit 0\n");
  const auto started = std::chrono::steady_clock::now();
  auto token = RunExecPlugin(exec, kDeadline);
  EXPECT_LT(std::chrono::steady_clock::now() - started, kWellWithinTheDeadline);
  ASSERT_FALSE(token);
  EXPECT_EQ(token.error().code(), ErrorCode::kUnauthenticated);
  EXPECT_THAT(token.error().message(), HasSubstr("not an ExecCredential"));
  EXPECT_TRUE(EndsSoon(PidIn(dir, "helper")));
}

TEST(ExecPlugin, AHelperThatLetGoOfTheOutputIsLeftRunning) {
  // A helper that does not hold the plugin's output (a cache it keeps, say) is no reason to
  // end anything. The plugin prints only once the helper has let go: until its forked shell
  // has run the redirection it still holds the output, which a loaded machine can delay
  // past the plugin's exit.
  TempDir dir;
  const auto exec =
      Plugin(dir, "sleep 30 >/dev/null &\necho $! > \"" + (dir.path() / "helper").string() +
                      "\"\nwhile [ \"$(readlink /proc/$!/fd/1)\" != /dev/null ]; do :; done\n"
                      "echo '" +
                      kCredential + "'\n");
  auto token = RunExecPlugin(exec, kDeadline);
  ASSERT_TRUE(token) << token.error().message();
  const std::string helper = PidIn(dir, "helper");
  EXPECT_FALSE(Ended(helper));
  ::kill(std::stoi(helper), SIGKILL);
}

TEST(ExecPlugin, APluginThatPrintsNothingTimesOut) {
  TempDir dir;
  const auto exec = Plugin(dir, "sleep 30\n");
  auto token = RunExecPlugin(exec, std::chrono::milliseconds(300));
  ASSERT_FALSE(token);
  EXPECT_THAT(token.error().message(), HasSubstr("did not finish within 300ms"));
  EXPECT_THAT(token.error().message(), HasSubstr(exec.command));
}

TEST(ExecPlugin, AFailingPluginIsReportedWithItsStatus) {
  TempDir dir;
  auto token = RunExecPlugin(Plugin(dir, "echo partial\nexit 4\n"));
  ASSERT_FALSE(token);
  EXPECT_THAT(token.error().message(), HasSubstr("exited with status 4"));
  EXPECT_THAT(token.error().message(), ::testing::Not(HasSubstr("partial")));
}

}  // namespace
}  // namespace exec_credential_test
}  // namespace certctl::kube
