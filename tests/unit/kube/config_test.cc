#include "certctl/kube/config.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "certctl/util/base64.h"

#include "support/temp_dir.h"

namespace certctl::kube {
namespace config_test {
namespace {

namespace fs = std::filesystem;
using certctl::testing::TempDir;

const std::string kCaPem = "-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----\n";
const std::string kCertPem = "-----BEGIN CERTIFICATE-----\nMIIBclient\n-----END CERTIFICATE-----\n";
const std::string kKeyPem = "-----BEGIN PRIVATE KEY-----\nMIGHkey\n-----END PRIVATE KEY-----\n";

MapEnvironment EnvWith(std::map<std::string, std::string, std::less<>> values) {
  return MapEnvironment(std::move(values));
}

Result<ClusterConfig> LoadFile(const fs::path& file, std::string context = "") {
  return LoadClusterConfig(ConfigOptions{file.string(), std::move(context)}, MapEnvironment());
}

void ExpectError(const Result<ClusterConfig>& config, const std::string& expected_part) {
  ASSERT_FALSE(config.has_value()) << "expected an error containing: " << expected_part;
  EXPECT_EQ(config.error().code(), ErrorCode::kInvalidArgument) << config.error().message();
  EXPECT_NE(config.error().message().find(expected_part), std::string::npos)
      << config.error().message();
}

// ---- In-cluster -------------------------------------------------------------------------------

TEST(KubeConfig, InClusterFromEnvironmentAndServiceAccountFolder) {
  TempDir sa;
  sa.Write("token", "sa-token\n");
  sa.Write("ca.crt", kCaPem);
  sa.Write("namespace", "infra\n");
  const auto env = EnvWith({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                            {"KUBERNETES_SERVICE_PORT", "443"},
                            {"CERTCTL_SERVICEACCOUNT_DIR", sa.path().string()}});
  auto config = LoadClusterConfig({}, env);
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->server, "https://10.96.0.1:443");
  EXPECT_EQ(config->tls.ca_pem, kCaPem);
  EXPECT_EQ(config->token_file, (sa / "token").string());
  EXPECT_TRUE(config->token.empty());  // read per request, never frozen
  EXPECT_EQ(config->namespace_name, "infra");
  EXPECT_EQ(config->description, "in-cluster");
}

TEST(KubeConfig, InClusterBracketsIpv6Hosts) {
  TempDir sa;
  sa.Write("token", "t");
  const auto env = EnvWith({{"KUBERNETES_SERVICE_HOST", "fd00::1"},
                            {"KUBERNETES_SERVICE_PORT", "6443"},
                            {"CERTCTL_SERVICEACCOUNT_DIR", sa.path().string()}});
  auto config = LoadClusterConfig({}, env);
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->server, "https://[fd00::1]:6443");
  EXPECT_TRUE(config->tls.ca_pem.empty());  // no ca.crt: the system store
  EXPECT_TRUE(config->namespace_name.empty());
}

TEST(KubeConfig, InClusterNeedsPortAndToken) {
  TempDir sa;
  ExpectError(LoadClusterConfig({}, EnvWith({{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}})),
              "KUBERNETES_SERVICE_PORT must be defined");
  auto missing_token =
      LoadClusterConfig({}, EnvWith({{"KUBERNETES_SERVICE_HOST", "10.0.0.1"},
                                     {"KUBERNETES_SERVICE_PORT", "443"},
                                     {"CERTCTL_SERVICEACCOUNT_DIR", sa.path().string()}}));
  ASSERT_FALSE(missing_token);
  EXPECT_NE(missing_token.error().message().find("service account token"), std::string::npos);
  EXPECT_NE(missing_token.error().message().find((sa / "token").string()), std::string::npos);
}

TEST(KubeConfig, ExplicitKubeconfigBeatsInCluster) {
  TempDir dir;
  const fs::path file = dir.Write("kc", R"(
current-context: c
clusters: [{name: k, cluster: {server: "https://k.example:6443/"}}]
contexts: [{name: c, context: {cluster: k}}]
)");
  const auto env = EnvWith({{"KUBERNETES_SERVICE_HOST", "10.0.0.1"},
                            {"KUBERNETES_SERVICE_PORT", "443"},
                            {"KUBECONFIG", "/nonexistent"}});
  auto config = LoadClusterConfig({file.string(), ""}, env);
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->server, "https://k.example:6443");
  EXPECT_EQ(config->description, "kubeconfig " + file.string() + ", context c");
}

// ---- Kubeconfig -------------------------------------------------------------------------------

TEST(KubeConfig, ReadsEmbeddedDataFieldsAndContextNamespace) {
  TempDir dir;
  const fs::path file = dir.Write("config", R"(
apiVersion: v1
kind: Config
current-context: emu
clusters:
- name: emu
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: )" + Base64Encode(kCaPem) +
                                                R"(
    tls-server-name: kubernetes.default.svc
users:
- name: ctrl
  user:
    token: abc
    client-certificate-data: )" + Base64Encode(kCertPem) +
                                                R"(
    client-key-data: )" + Base64Encode(kKeyPem) +
                                                R"(
contexts:
- name: emu
  context: {cluster: emu, user: ctrl, namespace: ca-system}
)");
  auto config = LoadFile(file);
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->server, "https://127.0.0.1:6443");
  EXPECT_EQ(config->tls.ca_pem, kCaPem);
  EXPECT_EQ(config->tls.server_name, "kubernetes.default.svc");
  EXPECT_FALSE(config->tls.insecure_skip_verify);
  EXPECT_EQ(config->tls.client_cert_pem, kCertPem);
  EXPECT_EQ(config->tls.client_key_pem, kKeyPem);
  EXPECT_EQ(config->token, "abc");
  EXPECT_EQ(config->namespace_name, "ca-system");
}

TEST(KubeConfig, RelativePathsResolveAgainstTheFileThatNamesThem) {
  TempDir dir;
  dir.Write("a/pki/ca.crt", kCaPem);
  dir.Write("b/creds/client.crt", kCertPem);
  dir.Write("b/creds/client.key", kKeyPem);
  const fs::path clusters = dir.Write("a/clusters.yaml", R"(
clusters:
- name: k
  cluster: {server: "https://k:6443", certificate-authority: pki/ca.crt}
)");
  const fs::path users = dir.Write("b/users.yaml", R"(
current-context: c
users:
- name: u
  user:
    client-certificate: creds/client.crt
    client-key: creds/client.key
    tokenFile: creds/token
    exec: {apiVersion: client.authentication.k8s.io/v1, command: ./bin/cred, args: [get]}
contexts:
- name: c
  context: {cluster: k, user: u}
)");
  const auto env = EnvWith({{"KUBECONFIG", users.string() + ":" + clusters.string()}});
  auto config = LoadClusterConfig({}, env);
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->tls.ca_pem, kCaPem);
  EXPECT_EQ(config->tls.client_cert_pem, kCertPem);
  EXPECT_EQ(config->tls.client_key_pem, kKeyPem);
  EXPECT_EQ(config->token_file, (dir / "b/creds/token").string());
  ASSERT_TRUE(config->exec.has_value());
  EXPECT_EQ(fs::path(config->exec->command).lexically_normal(), (dir / "b/bin/cred"));
  EXPECT_EQ(config->exec->args, std::vector<std::string>{"get"});
  EXPECT_EQ(config->exec->api_version, "client.authentication.k8s.io/v1");
}

TEST(KubeConfig, MergesTheKubeconfigListLikeKubectl) {
  TempDir dir;
  const fs::path first = dir.Write("first", R"(
current-context: from-first
clusters: [{name: shared, cluster: {server: "https://first:6443"}}]
contexts:
- {name: from-first, context: {cluster: shared, namespace: one}}
)");
  const fs::path second = dir.Write("second", R"(
current-context: from-second
clusters:
- {name: shared, cluster: {server: "https://second:6443"}}
- {name: only-second, cluster: {server: "https://only-second:6443"}}
contexts:
- {name: from-first, context: {cluster: only-second, namespace: two}}
- {name: from-second, context: {cluster: only-second}}
)");
  const std::string list =
      (dir / "missing").string() + ":" + first.string() + "::" + second.string();
  auto config = LoadClusterConfig({}, EnvWith({{"KUBECONFIG", list}}));
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->server, "https://first:6443");  // first file's context and cluster win
  EXPECT_EQ(config->namespace_name, "one");

  auto other = LoadClusterConfig({"", "from-second"}, EnvWith({{"KUBECONFIG", list}}));
  ASSERT_TRUE(other) << other.error().message();
  EXPECT_EQ(other->server, "https://only-second:6443");

  ExpectError(LoadClusterConfig(
                  {}, EnvWith({{"KUBECONFIG", (dir / "x").string() + ":" + (dir / "y").string()}})),
              "none of the files");
}

TEST(KubeConfig, EveryContextOfTheMergedListIsNamedOnceSorted) {
  TempDir dir;
  const fs::path first = dir.Write("first", R"(
contexts:
- {name: staging, context: {cluster: s}}
- {name: prod, context: {cluster: p}}
)");
  const fs::path second = dir.Write("second", R"(
contexts:
- {name: prod, context: {cluster: other}}
- {name: dev, context: {cluster: d}}
)");
  auto names =
      KubeconfigContexts({}, EnvWith({{"KUBECONFIG", first.string() + ":" + second.string()}}));
  ASSERT_TRUE(names) << names.error().message();
  EXPECT_EQ(*names, (std::vector<std::string>{"dev", "prod", "staging"}));

  auto none = KubeconfigContexts({(dir / "missing").string(), ""}, MapEnvironment());
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message().find("missing"), std::string::npos);
}

TEST(KubeConfig, DefaultsToKubeconfigInHome) {
  TempDir home;
  home.Write(".kube/config", R"(
current-context: c
clusters: [{name: k, cluster: {server: "https://home:6443"}}]
contexts: [{name: c, context: {cluster: k}}]
)");
  auto config = LoadClusterConfig({}, EnvWith({{"HOME", home.path().string()}}));
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->server, "https://home:6443");

  TempDir empty_home;
  ExpectError(LoadClusterConfig({}, EnvWith({{"HOME", empty_home.path().string()}})),
              (empty_home / ".kube/config").string());
  ExpectError(LoadClusterConfig({}, MapEnvironment()), "pass --kubeconfig");
}

TEST(KubeConfig, ContextFlagOverridesCurrentContext) {
  TempDir dir;
  const fs::path file = dir.Write("kc", R"(
current-context: a
clusters:
- {name: ka, cluster: {server: "https://a:1"}}
- {name: kb, cluster: {server: "https://b:2"}}
contexts:
- {name: a, context: {cluster: ka}}
- {name: b, context: {cluster: kb, namespace: nb}}
)");
  EXPECT_EQ(LoadFile(file)->server, "https://a:1");
  auto b = LoadFile(file, "b");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->server, "https://b:2");
  EXPECT_EQ(b->namespace_name, "nb");
}

TEST(KubeConfig, MissingEntriesAreNamedWithTheirFile) {
  TempDir dir;
  const fs::path file = dir.Write("kc", R"(
current-context: c
clusters: [{name: k, cluster: {server: "https://k:1"}}, {name: noserver, cluster: {}}]
users: [{name: u, user: {token: t}}]
contexts:
- {name: c, context: {cluster: k, user: u}}
- {name: bad-cluster, context: {cluster: nope, user: u}}
- {name: bad-user, context: {cluster: k, user: nobody}}
- {name: no-cluster, context: {user: u}}
- {name: no-server, context: {cluster: noserver}}
)");
  const std::string where = "kubeconfig " + file.string();
  ExpectError(LoadFile(file, "foo"), where + ": context \"foo\" not found");
  ExpectError(LoadFile(file, "bad-cluster"),
              where + ": context \"bad-cluster\": cluster \"nope\" not found");
  ExpectError(LoadFile(file, "bad-user"),
              where + ": context \"bad-user\": user \"nobody\" not found");
  ExpectError(LoadFile(file, "no-cluster"), "context \"no-cluster\": cluster is not set");
  ExpectError(LoadFile(file, "no-server"), "cluster \"noserver\": server is not set");

  // A URL without a host (a flow map's comma cut it short) is no server.
  for (const char* server : {"https://", "https:///", "http://"}) {
    const fs::path hostless = dir.Write(
        "hostless", std::string("current-context: c\nclusters: [{name: k, cluster: {server: '") +
                        server +
                        "'}}]\nusers: [{name: u, user: {}}]\n"
                        "contexts: [{name: c, context: {cluster: k, user: u}}]\n");
    ExpectError(LoadFile(hostless), "names no host");
  }

  const fs::path no_current = dir.Write("nocurrent", "clusters: []\n");
  ExpectError(LoadFile(no_current), "current-context is not set");
}

TEST(KubeConfig, BadFieldsAreNamed) {
  TempDir dir;
  auto load = [&](const std::string& cluster, const std::string& user) {
    const fs::path file = dir.Write("kc",
                                    "current-context: c\n"
                                    "clusters: [{name: k, cluster: {server: 'https://k:1'" +
                                        cluster +
                                        "}}]\n"
                                        "users: [{name: u, user: {" +
                                        user +
                                        "}}]\n"
                                        "contexts: [{name: c, context: {cluster: k, user: "
                                        "u}}]\n");
    return LoadFile(file);
  };
  ExpectError(load("", "client-certificate-data: " + Base64Encode(kCertPem) +
                           ", client-key-data: '!!notbase64'"),
              "user \"u\": client-key-data is not valid base64");
  ExpectError(load(", certificate-authority-data: 'abc'", ""),
              "cluster \"k\": certificate-authority-data is not valid base64");
  ExpectError(load(", certificate-authority-data: " + Base64Encode("garbage"), ""),
              "certificate-authority-data does not hold a PEM certificate");
  ExpectError(
      load(", certificate-authority: missing.crt", ""),
      "cluster \"k\": certificate-authority: cannot read " + (dir / "missing.crt").string());
  ExpectError(load(", insecure-skip-tls-verify: maybe", ""), "insecure-skip-tls-verify");
  ExpectError(
      load(", insecure-skip-tls-verify: true, certificate-authority-data: " + Base64Encode(kCaPem),
           ""),
      "insecure-skip-tls-verify cannot be combined");
  ExpectError(load("", "client-certificate-data: " + Base64Encode(kCertPem)),
              "client-certificate is set without client-key");
  ExpectError(load("", "auth-provider: {name: gcp}"), "user \"u\": auth-provider is not supported");
  ExpectError(load("", "username: admin, password: secret"), "basic authentication");
  ExpectError(load("", "exec: {command: cred}"), "exec: apiVersion \"\" is not supported");
  ExpectError(load(", proxy-url: 'http://proxy:3128'", ""), "proxy-url is not supported");

  auto insecure = load(", insecure-skip-tls-verify: true", "token: t");
  ASSERT_TRUE(insecure) << insecure.error().message();
  EXPECT_TRUE(insecure->tls.insecure_skip_verify);
}

TEST(KubeConfig, InvalidYamlNamesTheFileAndLine) {
  TempDir dir;
  const fs::path file = dir.Write("kc", "clusters:\n  - name: [unclosed\n");
  ExpectError(LoadFile(file), "kubeconfig " + file.string() + ": invalid YAML at line");
  ExpectError(LoadFile(dir / "absent"), (dir / "absent").string());
}

TEST(KubeConfig, PlainHttpServersGetNoCredentials) {
  TempDir dir;
  const fs::path file = dir.Write("kc", R"(
current-context: c
clusters: [{name: k, cluster: {server: "http://127.0.0.1:8080"}}]
users: [{name: u, user: {token: secret-token}}]
contexts: [{name: c, context: {cluster: k, user: u}}]
)");
  auto config = LoadFile(file);
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->server, "http://127.0.0.1:8080");
  EXPECT_TRUE(config->token.empty());
}

TEST(KubeConfig, ExecPluginSettings) {
  TempDir dir;
  const fs::path file = dir.Write("kc", R"(
current-context: c
clusters: [{name: k, cluster: {server: "https://k:1"}}]
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: aws
      args: [eks, get-token]
      env: [{name: AWS_PROFILE, value: prod}]
      interactiveMode: Never
contexts: [{name: c, context: {cluster: k, user: u}}]
)");
  auto config = LoadFile(file);
  ASSERT_TRUE(config) << config.error().message();
  ASSERT_TRUE(config->exec.has_value());
  EXPECT_EQ(config->exec->command, "aws");  // bare names are looked up in PATH
  EXPECT_EQ(config->exec->args, (std::vector<std::string>{"eks", "get-token"}));
  ASSERT_EQ(config->exec->env.size(), 1u);
  EXPECT_EQ(config->exec->env[0], (std::pair<std::string, std::string>{"AWS_PROFILE", "prod"}));
}

TEST(KubeConfig, ResolveNamespacePrecedence) {
  ClusterConfig config;
  MapEnvironment env;
  EXPECT_EQ(ResolveNamespace("", env, config), "default");
  config.namespace_name = "from-config";
  EXPECT_EQ(ResolveNamespace("", env, config), "from-config");
  env.Set("POD_NAMESPACE", "from-pod");
  EXPECT_EQ(ResolveNamespace("", env, config), "from-pod");
  EXPECT_EQ(ResolveNamespace("from-flag", env, config), "from-flag");
}

}  // namespace
}  // namespace config_test
}  // namespace certctl::kube
