#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "certctl/pki/certificate.h"
#include "certctl/util/base64.h"
#include "certctl/util/duration.h"

#include "support/certctl_cli.h"
#include "support/temp_dir.h"
#include <sys/stat.h>

namespace certctl::testing {
namespace generate_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

unsigned FileMode(const std::filesystem::path& path) {
  struct stat info {};
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return info.st_mode & 0777;
}

TEST(GenerateCommand, WritesVerifiablePairWithPrivateKeys) {
  TempDir dir;
  const auto result =
      RunCertctl({"generate", "--service", "hook", "-n", "infra", "--out-dir", dir.path()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(FileMode(dir / "ca.key"), 0600u);
  EXPECT_EQ(FileMode(dir / "tls.key"), 0600u);
  EXPECT_EQ(FileMode(dir / "ca.crt"), 0644u);
  EXPECT_EQ(FileMode(dir / "tls.crt"), 0644u);
  const std::string verified = Openssl({"verify", "-CAfile", (dir / "ca.crt").string(), "-purpose",
                                        "sslserver", (dir / "tls.crt").string()});
  EXPECT_THAT(verified, HasSubstr(": OK"));
  const std::string sans =
      Openssl({"x509", "-noout", "-ext", "subjectAltName", "-in", (dir / "tls.crt").string()});
  EXPECT_THAT(sans, HasSubstr("DNS:hook.infra.svc, DNS:hook, DNS:hook.infra, "
                              "DNS:hook.infra.svc.cluster.local"));
  EXPECT_THAT(result.err, Not(HasSubstr("PRIVATE KEY")));
}

TEST(GenerateCommand, HonoursKeyTypeValidityAndNames) {
  TempDir dir;
  const auto result =
      RunCertctl({"generate", "--service", "hook", "-n", "infra", "--key-type", "rsa-2048",
                  "--ca-validity", "2y", "--cert-validity", "5y", "--dns-name", "hook.example.com",
                  "--ip", "10.0.0.7", "--ca-name", "Example Root", "--out-dir", dir.path()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto ca = pki::Certificate::FromPem(dir.Read("ca.crt")).value().Info();
  const auto leaf = pki::Certificate::FromPem(dir.Read("tls.crt")).value().Info();
  EXPECT_EQ(ca.common_name, "Example Root");
  EXPECT_EQ(ca.key.name, "rsa-2048");
  EXPECT_EQ(leaf.key.name, "rsa-2048");
  // The leaf asked for 5 years but may not outlive its 2-year CA.
  EXPECT_EQ(leaf.not_after, ca.not_after);
  EXPECT_THAT(leaf.dns_names, ::testing::Contains("hook.example.com"));
  EXPECT_THAT(leaf.ip_addresses, ::testing::ElementsAre("10.0.0.7"));
}

TEST(GenerateCommand, PrintsSecretManifestInYamlAndJson) {
  const auto yaml = RunCertctl(
      {"generate", "--service", "hook", "-n", "infra", "-o", "secret", "--secret", "hook-tls"});
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  EXPECT_THAT(yaml.out, HasSubstr("kind: Secret\n"));
  EXPECT_THAT(yaml.out, HasSubstr("  name: hook-tls\n  namespace: infra\n"));
  EXPECT_THAT(yaml.out, HasSubstr("type: kubernetes.io/tls\n"));
  EXPECT_THAT(yaml.out, HasSubstr("app.kubernetes.io/managed-by: certctl"));
  for (const char* key : {"ca.crt", "ca.key", "tls.crt", "tls.key"}) {
    EXPECT_THAT(yaml.out, HasSubstr(std::string("  ") + key + ": ")) << key;
  }

  const auto json =
      RunCertctl({"generate", "--service", "hook", "-n", "infra", "-o", "secret-json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto manifest = nlohmann::json::parse(json.out);
  EXPECT_EQ(manifest["type"], "kubernetes.io/tls");
  EXPECT_EQ(manifest["metadata"]["name"], "webhook-server-cert");
  const std::string tls_key = Base64Decode(manifest["data"]["tls.key"].get<std::string>()).value();
  EXPECT_THAT(tls_key, HasSubstr("-----BEGIN PRIVATE KEY-----"));
  const std::string tls_crt = Base64Decode(manifest["data"]["tls.crt"].get<std::string>()).value();
  EXPECT_EQ(pki::Certificate::FromPem(tls_crt).value().Info().common_name, "hook.infra.svc");
}

TEST(GenerateCommand, RefusesToOverwriteWithoutForce) {
  TempDir dir;
  dir.Write("tls.crt", "keep me");
  const auto refused = RunCertctl({"generate", "--service", "hook", "--out-dir", dir.path()});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("already exists"));
  EXPECT_EQ(dir.Read("tls.crt"), "keep me");
  EXPECT_FALSE(std::filesystem::exists(dir / "ca.key"));

  const auto forced =
      RunCertctl({"generate", "--service", "hook", "--out-dir", dir.path(), "--force"});
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_THAT(dir.Read("tls.crt"), HasSubstr("BEGIN CERTIFICATE"));
}

TEST(GenerateCommand, AFolderHoldingAPairIsRefusedWithoutAWordOfGenerating) {
  TempDir dir;
  ASSERT_EQ(RunCertctl({"generate", "--service", "hook", "-n", "infra", "--out-dir", dir.path()})
                .exit_code,
            0);
  const std::string before = dir.Read("tls.crt");
  const auto refused =
      RunCertctl({"generate", "--service", "hook", "-n", "infra", "--out-dir", dir.path()});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_EQ(CountLines(refused.err), 1) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("already exists (use --force to replace it)"));
  EXPECT_THAT(refused.err, Not(HasSubstr("generated")));
  EXPECT_EQ(dir.Read("tls.crt"), before);
}

TEST(GenerateCommand, LogsWhatItWroteWithBothExpiryTimes) {
  TempDir dir;
  const auto result = RunCertctl({"generate", "--service", "hook", "-n", "infra", "--ca-validity",
                                  "5y", "--cert-validity", "1y", "--out-dir", dir.path()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto ca = pki::Certificate::FromPem(dir.Read("ca.crt")).value().Info();
  const auto leaf = pki::Certificate::FromPem(dir.Read("tls.crt")).value().Info();
  EXPECT_EQ(CountLines(result.err), 1) << result.err;
  EXPECT_THAT(result.err, HasSubstr("generated CA \"hook-ca\" (ecdsa-p256, valid until " +
                                    FormatRfc3339(ca.not_after) + ")"));
  EXPECT_THAT(result.err, HasSubstr("server certificate for hook.infra.svc (4 names, valid until " +
                                    FormatRfc3339(leaf.not_after) +
                                    "): ca.crt, ca.key, tls.crt, "
                                    "tls.key in " +
                                    dir.path().string()));
}

TEST(GenerateCommand, WarnsOfAValidityWithinTheRenewalWindow) {
  const auto short_leaf = RunCertctl(
      {"generate", "--service", "hook", "-n", "infra", "--cert-validity", "1h", "-o", "secret"});
  ASSERT_EQ(short_leaf.exit_code, 0) << short_leaf.err;
  EXPECT_THAT(short_leaf.err,
              HasSubstr("warning the server certificate is valid for 1h only, within the 30d "
                        "before expiry at which check reports it expiring-soon"));
  const auto short_ca = RunCertctl(
      {"generate", "--service", "hook", "-n", "infra", "--ca-validity", "7d", "-o", "secret"});
  EXPECT_THAT(short_ca.err, HasSubstr("warning the CA is valid for 7d only"));
  const auto healthy = RunCertctl(
      {"generate", "--service", "hook", "-n", "infra", "--cert-validity", "90d", "-o", "secret"});
  EXPECT_THAT(healthy.err, Not(HasSubstr("warning")));
}

TEST(GenerateCommand, SaysWhenTheNamespaceIsTheDefaultOne) {
  ProcessOptions no_pod_namespace;
  no_pod_namespace.extra_env["POD_NAMESPACE"] = "";
  const auto defaulted =
      RunCertctl({"generate", "--service", "hook", "-o", "secret"}, no_pod_namespace);
  ASSERT_EQ(defaulted.exit_code, 0) << defaulted.err;
  EXPECT_THAT(defaulted.err, HasSubstr("no -n and no $POD_NAMESPACE: the Service \"hook\" is "
                                       "taken to be in namespace \"default\""));
  EXPECT_THAT(defaulted.out, HasSubstr("namespace: default\n"));

  const auto given = RunCertctl({"generate", "--service", "hook", "-n", "infra", "-o", "secret"},
                                no_pod_namespace);
  EXPECT_THAT(given.err, Not(HasSubstr("no -n")));
  ProcessOptions pod_namespace;
  pod_namespace.extra_env["POD_NAMESPACE"] = "infra";
  const auto from_env =
      RunCertctl({"generate", "--service", "hook", "-o", "secret"}, pod_namespace);
  EXPECT_THAT(from_env.err, Not(HasSubstr("no -n")));
  EXPECT_THAT(from_env.out, HasSubstr("namespace: infra\n"));
}

TEST(GenerateCommand, TheFolderGetsTheSameModeUnderAnyUmask) {
  // Under umask 000 the folder was once created world-writable (0777).
  TempDir dir;
  const mode_t previous = ::umask(0);
  const auto result = RunCertctl({"generate", "--service", "hook", "--out-dir", dir / "new/pki"});
  ::umask(previous);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(FileMode(dir / "new"), 0755u);
  EXPECT_EQ(FileMode(dir / "new/pki"), 0755u);
  EXPECT_EQ(FileMode(dir / "new/pki/tls.key"), 0600u);
  EXPECT_EQ(FileMode(dir / "new/pki/tls.crt"), 0644u);
}

TEST(GenerateCommand, AnExistingFolderKeepsItsMode) {
  TempDir dir;
  std::filesystem::create_directory(dir / "private");
  std::filesystem::permissions(dir / "private", std::filesystem::perms::owner_all);
  ASSERT_EQ(RunCertctl({"generate", "--service", "hook", "--out-dir", dir / "private"}).exit_code,
            0);
  EXPECT_EQ(FileMode(dir / "private"), 0700u);
}

TEST(GenerateCommand, AFileInThePlaceOfTheFolderIsAnError) {
  TempDir dir;
  dir.Write("taken", "not a folder");
  const auto result = RunCertctl({"generate", "--service", "hook", "--out-dir", dir / "taken/pki"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("is not a folder"));
  EXPECT_EQ(dir.Read("taken"), "not a folder");
}

TEST(GenerateCommand, ADanglingSymlinkIsRefusedLikeAFile) {
  TempDir dir;
  std::filesystem::create_symlink(dir / "elsewhere/key.pem", dir / "tls.key");
  const auto refused = RunCertctl({"generate", "--service", "hook", "--out-dir", dir.path()});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("tls.key already exists"));
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "tls.key"));

  // --force replaces the link itself; it never writes through it.
  const auto forced =
      RunCertctl({"generate", "--service", "hook", "--out-dir", dir.path(), "--force"});
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_FALSE(std::filesystem::is_symlink(dir / "tls.key"));
  EXPECT_FALSE(std::filesystem::exists(dir / "elsewhere"));
  EXPECT_EQ(FileMode(dir / "tls.key"), 0600u);
}

TEST(GenerateCommand, TheFolderIsSyncedAfterTheLastRename) {
  // A crash right after generate must not lose the renames: the folder itself is fsynced.
  TempDir dir;
  const std::filesystem::path trace = dir / "trace";
  const std::filesystem::path out = dir / "pki";
  ProcessOptions untracked_leaks;
  // LeakSanitizer cannot run under ptrace; the other tests cover leaks.
  untracked_leaks.extra_env["ASAN_OPTIONS"] = "detect_leaks=0";
  const auto traced = RunProcess(
      {"strace", "-f", "-e", "trace=openat,rename,renameat,renameat2,fsync", "-o", trace.string(),
       CERTCTL_BINARY, "generate", "--service", "hook", "--out-dir", out.string()},
      untracked_leaks);
  ASSERT_EQ(traced.exit_code, 0) << traced.err;
  std::ifstream log(trace);
  std::string line;
  std::string folder_fd;
  bool renamed = false;
  bool synced_after_rename = false;
  while (std::getline(log, line)) {
    if (line.find("rename") != std::string::npos && line.find(out.string()) != std::string::npos) {
      renamed = true;
      synced_after_rename = false;
    }
    if (line.find("openat(") != std::string::npos &&
        line.find("\"" + out.string() + "\"") != std::string::npos &&
        line.find("O_DIRECTORY") != std::string::npos) {
      folder_fd = line.substr(line.rfind("= ") + 2);
    }
    if (!folder_fd.empty() && line.find("fsync(" + folder_fd + ")") != std::string::npos) {
      synced_after_rename = renamed;
    }
  }
  EXPECT_TRUE(renamed);
  EXPECT_TRUE(synced_after_rename) << "no fsync of " << out << " after the last rename";
}

TEST(GenerateCommand, BadInputIsAUsageErrorOnOneLine) {
  TempDir dir;
  const std::vector<std::vector<std::string>> cases = {
      {"generate", "--service", "hook", "--key-type", "rsa-1024", "--out-dir", dir.path()},
      {"generate", "--service", "hook", "--ca-validity", "10x", "--out-dir", dir.path()},
      {"generate", "--service", "Not_A_Name", "--out-dir", dir.path()},
      {"generate", "--service", "hook", "--ip", "300.1.1.1", "--out-dir", dir.path()},
      {"generate", "--out-dir", dir.path()},
      {"generate", "--service", "hook"},
      {"generate", "--service", "hook", "-o", "yaml"},
      {"generate", "--service", "hook", "-o", "secret", "--secret", "Bad Name"},
  };
  for (const auto& args : cases) {
    const auto result = RunCertctl(args);
    EXPECT_EQ(result.exit_code, 2) << args[2] << " " << result.err;
    EXPECT_EQ(CountLines(result.err), 1) << result.err;
    EXPECT_THAT(result.err, HasSubstr("certctl generate"));
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "tls.crt"));
}

}  // namespace
}  // namespace generate_test
}  // namespace certctl::testing
