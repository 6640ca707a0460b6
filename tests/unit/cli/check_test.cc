#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/certctl_cli.h"
#include "support/temp_dir.h"

namespace certctl::testing {
namespace check_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class CheckCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto result =
        RunCertctl({"generate", "--service", "hook", "-n", "infra", "--out-dir", dir_.path()});
    ASSERT_EQ(result.exit_code, 0) << result.err;
  }

  TempDir dir_;
};

TEST_F(CheckCommand, HealthyPairExitsZeroWithSummary) {
  const auto result =
      RunCertctl({"check", "--cert-dir", dir_.path(), "--service", "hook", "-n", "infra"});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_THAT(result.out, HasSubstr("ok: dir " + dir_.path().string()));
  EXPECT_THAT(result.out, HasSubstr("hook.infra.svc"));
  EXPECT_EQ(CountLines(result.out), 1);
}

TEST_F(CheckCommand, ExplicitFilesWork) {
  const auto result = RunCertctl(
      {"check", "--cert", dir_ / "tls.crt", "--key", dir_ / "tls.key", "--ca", dir_ / "ca.crt"});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
}

TEST_F(CheckCommand, JsonDocumentHasTheStableFields) {
  const auto result = RunCertctl(
      {"check", "--cert-dir", dir_.path(), "--service", "hook", "-n", "infra", "-o", "json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto report = nlohmann::json::parse(result.out);
  EXPECT_EQ(report["ok"], true);
  EXPECT_EQ(report["source"], "dir " + dir_.path().string());
  ASSERT_EQ(report["certificates"]["ca"].size(), 1u);
  const auto& ca = report["certificates"]["ca"][0];
  EXPECT_EQ(ca["isCA"], true);
  EXPECT_EQ(ca["keyType"], "ecdsa-p256");
  const auto& leaf = report["certificates"]["leaf"];
  for (const char* field : {"subject", "issuer", "serial", "notBefore", "notAfter", "dnsNames",
                            "ipAddresses", "keyType", "isCA"}) {
    EXPECT_TRUE(leaf.contains(field)) << field;
  }
  EXPECT_EQ(leaf["dnsNames"][0], "hook.infra.svc");
  EXPECT_EQ(leaf["isCA"], false);
  EXPECT_TRUE(report["targets"].is_array());
  EXPECT_TRUE(report["findings"].empty());
}

TEST_F(CheckCommand, WrongServiceIsASanFinding) {
  const auto result = RunCertctl(
      {"check", "--cert-dir", dir_.path(), "--service", "other", "-n", "infra", "-o", "json"});
  EXPECT_EQ(result.exit_code, 1);
  const auto report = nlohmann::json::parse(result.out);
  EXPECT_EQ(report["ok"], false);
  ASSERT_FALSE(report["findings"].empty());
  EXPECT_EQ(report["findings"][0]["code"], "san-missing");
  EXPECT_EQ(report["findings"][0]["object"], (dir_ / "tls.crt").string());
  EXPECT_THAT(report["findings"][0]["message"].get<std::string>(), HasSubstr("other.infra.svc"));
}

TEST_F(CheckCommand, RenewBeforeBeyondLifetimeReportsExpiringSoon) {
  const auto result = RunCertctl({"check", "--cert-dir", dir_.path(), "--renew-before", "11y"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.out, HasSubstr("[expiring-soon]"));
  EXPECT_THAT(result.out, HasSubstr(dir_.path() / "tls.crt"));
}

TEST_F(CheckCommand, TextNamesTheFileAndTheProblem) {
  dir_.Write("tls.crt", "-----BEGIN CERTIFICATE-----\nMIIB\n");
  const auto result = RunCertctl({"check", "--cert-dir", dir_.path()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.out, HasSubstr((dir_ / "tls.crt").string() + ": "));
  EXPECT_THAT(result.out, HasSubstr("[unparsable]"));
  EXPECT_THAT(result.out, HasSubstr("\nwhat to do: docs/troubleshooting.md#unparsable\n"));
}

TEST_F(CheckCommand, MissingFileInFolderIsAFinding) {
  std::filesystem::remove(dir_ / "tls.key");
  const auto result = RunCertctl({"check", "--cert-dir", dir_.path()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.out, HasSubstr((dir_ / "tls.key").string()));
  EXPECT_THAT(result.out, HasSubstr("[missing]"));
}

TEST_F(CheckCommand, KeyFromAnotherPairIsAMismatch) {
  TempDir other;
  ASSERT_EQ(RunCertctl({"generate", "--service", "hook", "--out-dir", other.path()}).exit_code, 0);
  std::filesystem::copy_file(other / "tls.key", dir_ / "tls.key",
                             std::filesystem::copy_options::overwrite_existing);
  const auto result = RunCertctl({"check", "--cert-dir", dir_.path()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.out, HasSubstr("[key-mismatch]"));
}

TEST_F(CheckCommand, AWrongKeyFileIsNamedOnce) {
  const std::string key = (dir_ / "ca.key").string();
  const auto result =
      RunCertctl({"check", "--cert", dir_ / "tls.crt", "--key", key, "--ca", dir_ / "ca.crt"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.out, HasSubstr(key + ": the private key does not match server certificate "
                                          "\"hook.infra.svc\" [key-mismatch]"));
  // The path once per line: the line names its file, the message does not repeat it.
  for (std::size_t at = result.out.find(key); at != std::string::npos;
       at = result.out.find(key, at + 1)) {
    const std::size_t line_start = result.out.rfind('\n', at) + 1;
    EXPECT_EQ(at, line_start) << result.out;
  }
}

TEST_F(CheckCommand, FilesWithoutANamespaceSayTheDefaultIsUsed) {
  ProcessOptions no_pod_namespace;
  no_pod_namespace.extra_env["POD_NAMESPACE"] = "";
  const auto result =
      RunCertctl({"check", "--cert-dir", dir_.path(), "--service", "hook"}, no_pod_namespace);
  EXPECT_EQ(result.exit_code, 1);  // the pair is for hook.infra.svc
  EXPECT_THAT(result.err, HasSubstr("no -n and no $POD_NAMESPACE: the Service \"hook\" is taken "
                                    "to be in namespace \"default\""));
}

TEST_F(CheckCommand, CouldNotRunExitsTwo) {
  const std::vector<std::vector<std::string>> cases = {
      {"check", "--cert-dir", (dir_ / "nowhere").string()},
      {"check", "--cert", dir_ / "tls.crt"},
      {"check", "--cert", dir_ / "nope.crt", "--key", dir_ / "tls.key", "--ca", dir_ / "ca.crt"},
      {"check", "--cert", dir_.path(), "--key", dir_ / "tls.key", "--ca", dir_ / "ca.crt"},
      {"check"},
      {"check", "--cert-dir", dir_.path(), "-o", "xml"},
      {"check", "--cert-dir", dir_.path(), "--renew-before", "soon"},
  };
  // No cluster configuration anywhere: checking the default Secret cannot run either.
  ProcessOptions no_cluster;
  no_cluster.extra_env = {{"KUBECONFIG", (dir_ / "no-kubeconfig").string()},
                          {"KUBERNETES_SERVICE_HOST", ""}};
  for (const auto& args : cases) {
    const auto result = RunCertctl(args, no_cluster);
    EXPECT_EQ(result.exit_code, 2) << args.back() << ": " << result.err;
    EXPECT_EQ(CountLines(result.err), 1) << result.err;
    EXPECT_TRUE(result.out.empty()) << result.out;
  }
}

TEST_F(CheckCommand, AFileGivenAsTheFolderIsNamedAsSuch) {
  const auto result = RunCertctl({"check", "--cert-dir", dir_ / "tls.crt", "-o", "json"});
  EXPECT_EQ(result.exit_code, 2) << result.out << result.err;
  EXPECT_THAT(result.err, HasSubstr("tls.crt is not a folder"));
  const auto report = nlohmann::json::parse(result.out);  // one document, even now
  EXPECT_EQ(report["ok"], false);
  EXPECT_THAT(report["error"].get<std::string>(), HasSubstr("is not a folder"));
}

TEST_F(CheckCommand, WithoutNamesOrTargetsItSaysNoSanWasChecked) {
  const auto result = RunCertctl({"check", "--cert-dir", dir_.path()});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_THAT(result.out, HasSubstr("\nnote: no SAN was checked: "));
  const auto named =
      RunCertctl({"check", "--cert-dir", dir_.path(), "--service", "hook", "-n", "infra"});
  EXPECT_THAT(named.out, Not(HasSubstr("note:")));
}

}  // namespace
}  // namespace check_test
}  // namespace certctl::testing
