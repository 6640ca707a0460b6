#include "kube/token_source.h"

#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "certctl/util/duration.h"

#include "fakes/fake_clock.h"
#include "kube/exec_credential.h"
#include "support/temp_dir.h"

namespace certctl::kube {
namespace token_source_test {
namespace {

namespace fs = std::filesystem;
using certctl::testing::FakeClock;
using certctl::testing::TempDir;

ClusterConfig WithTokenFile(const fs::path& file) {
  ClusterConfig config;
  config.server = "https://api.test";
  config.token_file = file.string();
  return config;
}

TEST(TokenSource, StaticTokenAndNone) {
  FakeClock clock;
  ClusterConfig config;
  config.token = "static-token";
  TokenSource source(config, clock);
  EXPECT_EQ(source.Token().value(), "static-token");
  EXPECT_FALSE(source.Invalidate());
  EXPECT_EQ(source.Token().value(), "static-token");

  TokenSource none(ClusterConfig{}, clock);
  EXPECT_EQ(none.Token().value(), "");
  EXPECT_FALSE(none.Invalidate());
}

TEST(TokenSource, TokenFileIsReReadAfterOneMinuteButNotBefore) {
  TempDir dir;
  const fs::path file = dir.Write("token", "first\n");
  FakeClock clock;
  TokenSource source(WithTokenFile(file), clock);
  EXPECT_EQ(source.Token().value(), "first");  // trimmed

  dir.Write("token", "second");
  clock.Advance(std::chrono::seconds(59));
  EXPECT_EQ(source.Token().value(), "first");
  clock.Advance(std::chrono::seconds(1));
  EXPECT_EQ(source.Token().value(), "second");

  dir.Write("token", "third");
  clock.Advance(std::chrono::seconds(30));
  EXPECT_EQ(source.Token().value(), "second");
}

TEST(TokenSource, InvalidateMakesTheNextTokenComeFromTheFile) {
  TempDir dir;
  const fs::path file = dir.Write("token", "old");
  FakeClock clock;
  TokenSource source(WithTokenFile(file), clock);
  EXPECT_EQ(source.Token().value(), "old");
  dir.Write("token", "new");
  EXPECT_TRUE(source.Invalidate());
  EXPECT_EQ(source.Token().value(), "new");
}

TEST(TokenSource, ReadableFileWinsOverStaticTokenAndStaticIsTheFallback) {
  TempDir dir;
  ClusterConfig config = WithTokenFile(dir / "token");
  config.token = "static";
  FakeClock clock;
  TokenSource missing(config, clock);
  EXPECT_EQ(missing.Token().value(), "static");

  dir.Write("token", "from-file");
  TokenSource present(config, clock);
  EXPECT_EQ(present.Token().value(), "from-file");
}

TEST(TokenSource, KeepsTheLastGoodTokenWhileTheFileIsBeingReplaced) {
  TempDir dir;
  const fs::path file = dir.Write("token", "good");
  FakeClock clock;
  TokenSource source(WithTokenFile(file), clock);
  EXPECT_EQ(source.Token().value(), "good");
  fs::remove(file);
  clock.Advance(std::chrono::seconds(120));
  EXPECT_EQ(source.Token().value(), "good");
}

TEST(TokenSource, UnreadableTokenFileIsUnauthenticated) {
  TempDir dir;
  FakeClock clock;
  TokenSource missing(WithTokenFile(dir / "token"), clock);
  auto token = missing.Token();
  ASSERT_FALSE(token);
  EXPECT_EQ(token.error().code(), ErrorCode::kUnauthenticated);
  EXPECT_NE(token.error().message().find((dir / "token").string()), std::string::npos);

  TokenSource empty(WithTokenFile(dir.Write("empty", " \n")), clock);
  ASSERT_FALSE(empty.Token());
  EXPECT_EQ(empty.Token().error().code(), ErrorCode::kUnauthenticated);
}

// A plugin that counts its runs, checks what it was given and prints a fresh token.
fs::path WritePlugin(const TempDir& dir, const std::string& expiry) {
  const std::string script =
      "#!/bin/sh\n"
      "count=$(cat \"" +
      (dir / "count").string() +
      "\" 2>/dev/null || echo 0)\n"
      "count=$((count + 1))\n"
      "echo $count > \"" +
      (dir / "count").string() +
      "\"\n"
      "echo \"$KUBERNETES_EXEC_INFO\" > \"" +
      (dir / "info").string() +
      "\"\n"
      "echo \"$1 $PLUGIN_VAR\" > \"" +
      (dir / "seen").string() +
      "\"\n"
      "cat <<EOF\n"
      "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
      "\"status\":{\"token\":\"exec-token-$count\"" +
      (expiry.empty() ? "" : ",\"expirationTimestamp\":\"" + expiry + "\"") +
      "}}\n"
      "EOF\n";
  const fs::path plugin = dir.Write("plugin.sh", script);
  fs::permissions(plugin, fs::perms::owner_all);
  return plugin;
}

ClusterConfig WithExec(const fs::path& plugin) {
  ClusterConfig config;
  config.exec = ExecCredential{plugin.string(),
                               {"--flag"},
                               {{"PLUGIN_VAR", "plugin-value"}},
                               "client.authentication.k8s.io/v1"};
  return config;
}

TEST(TokenSource, ExecPluginTokenIsCachedUntilItExpires) {
  TempDir dir;
  FakeClock clock;
  const TimePoint expiry = clock.Now() + std::chrono::minutes(10);
  TokenSource source(WithExec(WritePlugin(dir, FormatRfc3339(expiry))), clock);
  EXPECT_EQ(source.Token().value(), "exec-token-1");
  clock.Advance(std::chrono::seconds(599));
  EXPECT_EQ(source.Token().value(), "exec-token-1");
  clock.Advance(std::chrono::seconds(1));
  EXPECT_EQ(source.Token().value(), "exec-token-2");

  const auto info = nlohmann::json::parse(dir.Read("info"));
  EXPECT_EQ(info["kind"], "ExecCredential");
  EXPECT_EQ(info["apiVersion"], "client.authentication.k8s.io/v1");
  EXPECT_EQ(info["spec"]["interactive"], false);
  EXPECT_EQ(dir.Read("seen"), "--flag plugin-value\n");
}

TEST(TokenSource, ExecPluginRunsAgainAfterA401) {
  TempDir dir;
  FakeClock clock;
  TokenSource source(WithExec(WritePlugin(dir, "")), clock);
  EXPECT_EQ(source.Token().value(), "exec-token-1");
  clock.Advance(std::chrono::hours(24));
  EXPECT_EQ(source.Token().value(), "exec-token-1");  // no expiry: kept
  EXPECT_TRUE(source.Invalidate());
  EXPECT_EQ(source.Token().value(), "exec-token-2");
}

TEST(TokenSource, FailingExecPluginNamesTheCommand) {
  TempDir dir;
  const fs::path plugin = dir.Write("fail.sh", "#!/bin/sh\necho oops >&2\nexit 3\n");
  fs::permissions(plugin, fs::perms::owner_all);
  FakeClock clock;
  TokenSource source(WithExec(plugin), clock);
  auto token = source.Token();
  ASSERT_FALSE(token);
  EXPECT_EQ(token.error().code(), ErrorCode::kUnauthenticated);
  EXPECT_NE(token.error().message().find(plugin.string()), std::string::npos);
  EXPECT_NE(token.error().message().find("exited with status 3"), std::string::npos);

  TokenSource missing(WithExec(dir / "no-such-plugin"), clock);
  ASSERT_FALSE(missing.Token());
  EXPECT_NE(missing.Token().error().message().find("no-such-plugin"), std::string::npos);
}

TEST(TokenSource, ExecCredentialOutputIsCheckedWithoutBeingQuoted) {
  const ExecCredential exec{"plugin", {}, {}, "client.authentication.k8s.io/v1"};
  for (
      const char* output :
      {"not json sekret", R"js({"kind":"Other","apiVersion":"client.authentication.k8s.io/v1"})js",
       R"js({"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1beta1","status":{"token":"sekret"}})js",
       R"js({"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","status":{}})js",
       R"js({"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","status":{"token":"sekret","expirationTimestamp":"soon"}})js"}) {
    auto parsed = ParseExecCredential(output, exec);
    ASSERT_FALSE(parsed) << output;
    EXPECT_EQ(parsed.error().code(), ErrorCode::kUnauthenticated);
    EXPECT_EQ(parsed.error().message().find("sekret"), std::string::npos) << output;
  }
  auto ok = ParseExecCredential(
      R"js({"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","status":{"token":"t","expirationTimestamp":"2030-01-01T00:00:00Z"}})js",
      exec);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->token, "t");
  EXPECT_EQ(ok->expiry, ParseRfc3339("2030-01-01T00:00:00Z").value());
}

}  // namespace
}  // namespace token_source_test
}  // namespace certctl::kube
