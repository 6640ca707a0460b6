#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/kube/client.h"
#include "certctl/util/version.h"

#include "fakes/fake_clock.h"
#include "fakes/fake_transport.h"
#include "support/temp_dir.h"

namespace certctl::kube {
namespace rest_client_test {
namespace {

using certctl::testing::FakeClock;
using certctl::testing::FakeReply;
using certctl::testing::FakeTransport;
using certctl::testing::TempDir;
using std::chrono::milliseconds;

constexpr char kToken[] = "sekret-bearer-token";
constexpr char kServer[] = "https://api.test:6443";
constexpr char kSecretPath[] = "/api/v1/namespaces/infra/secrets/webhook-server-cert";
constexpr char kSecretsPath[] = "/api/v1/namespaces/infra/secrets";

Json Secret(const std::string& name, const std::string& rv = "1") {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", {{"name", name}, {"namespace", "infra"}, {"resourceVersion", rv}}},
          {"type", "kubernetes.io/tls"}};
}

class RestClientTest : public ::testing::Test {
 protected:
  RestClientTest() {
    config_.server = kServer;
    config_.token = kToken;
    options_.qps = 0;  // most tests are not about rate limiting
  }

  std::unique_ptr<Client> NewClient() {
    auto client = MakeRestClient(config_, server_.NewTransport(), options_, clock_);
    EXPECT_TRUE(client) << client.error().message();
    return std::move(*client);
  }

  // Every sleep the client took, whatever its reason.
  const std::vector<milliseconds>& sleeps() const { return clock_.sleeps(); }

  ClusterConfig config_;
  ClientOptions options_;
  FakeClock clock_;
  FakeTransport server_;
};

// ---- Requests on the wire ---------------------------------------------------------------------

TEST_F(RestClientTest, SendsJsonHeadersUserAgentAndBearerToken) {
  server_.Script("GET", kSecretPath, {FakeReply::Json(200, Secret("webhook-server-cert"))});
  auto client = NewClient();
  auto secret = client->Get(kSecrets, "infra", "webhook-server-cert");
  ASSERT_TRUE(secret) << secret.error().message();
  ASSERT_TRUE(secret->has_value());
  EXPECT_EQ((**secret)["metadata"]["name"], "webhook-server-cert");

  const auto requests = server_.requests();
  ASSERT_EQ(requests.size(), 1u);
  const HttpRequest& request = requests[0];
  EXPECT_EQ(request.method, "GET");
  EXPECT_EQ(request.url, std::string(kServer) + kSecretPath);
  EXPECT_EQ(FakeTransport::Header(request, "Accept"), "application/json");
  EXPECT_EQ(FakeTransport::Header(request, "User-Agent"), "certctl/" + std::string(Version()));
  EXPECT_EQ(FakeTransport::Header(request, "Authorization"), "Bearer " + std::string(kToken));
  EXPECT_EQ(request.timeout, options_.request_timeout);
}

TEST_F(RestClientTest, NeverAsksForOrSendsProtobuf) {
  server_.SetHandler([](const HttpRequest& request) {
    return FakeReply::Json(request.method == "POST" ? 201 : 200, Secret("s"));
  });
  auto client = NewClient();
  ASSERT_TRUE(client->Get(kSecrets, "infra", "s"));
  ASSERT_TRUE(client->List(kSecrets, "infra", {}));
  ASSERT_TRUE(client->Create(kSecrets, "infra", Secret("s")));
  ASSERT_TRUE(client->Update(kSecrets, "infra", "s", Secret("s")));
  ASSERT_TRUE(client->Patch(kSecrets, "infra", "s", PatchType::kMerge, {{"data", {}}}));
  ASSERT_TRUE(client->Delete(kSecrets, "infra", "s"));
  for (const HttpRequest& request : server_.requests()) {
    for (const auto& [name, value] : request.headers) {
      EXPECT_EQ(value.find("protobuf"), std::string::npos) << name << ": " << value;
    }
    EXPECT_EQ(FakeTransport::Header(request, "Accept"), "application/json");
  }
}

TEST_F(RestClientTest, OmitsAuthorizationWithoutToken) {
  config_.token.clear();
  server_.Script("GET", kSecretPath, {FakeReply::Json(200, Secret("webhook-server-cert"))});
  ASSERT_TRUE(NewClient()->Get(kSecrets, "infra", "webhook-server-cert"));
  EXPECT_FALSE(FakeTransport::Header(server_.requests()[0], "Authorization").has_value());
}

TEST_F(RestClientTest, CustomUserAgent) {
  options_.user_agent = "certctl-e2e/1";
  server_.Script("GET", kSecretPath, {FakeReply::Json(200, Secret("webhook-server-cert"))});
  ASSERT_TRUE(NewClient()->Get(kSecrets, "infra", "webhook-server-cert"));
  EXPECT_EQ(FakeTransport::Header(server_.requests()[0], "User-Agent"), "certctl-e2e/1");
}

TEST_F(RestClientTest, BuildsCoreGroupAndClusterScopedPaths) {
  config_.server = "https://proxy.test/k8s/clusters/c1/";
  // Each answer names the object asked for: the last path segment, decoded.
  server_.SetHandler([](const HttpRequest& request) {
    const std::string path = FakeTransport::PathOf(request.url);
    std::string name = path.substr(path.rfind('/') + 1);
    if (name == "odd%20name%2Fx") {
      name = "odd name/x";
    }
    return FakeReply::Json(200, {{"metadata", {{"name", name}}}});
  });
  auto client = NewClient();
  ASSERT_TRUE(client->Get(kLeases, "kube-system", "lock"));
  ASSERT_TRUE(client->Get(kValidatingWebhookConfigurations, "ignored", "hook.example.com"));
  ASSERT_TRUE(client->Get(kCustomResourceDefinitions, "", "widgets.example.com"));
  ASSERT_TRUE(client->Get(kSecrets, "infra", "odd name/x"));
  const auto requests = server_.requests();
  ASSERT_EQ(requests.size(), 4u);
  EXPECT_EQ(requests[0].url,
            "https://proxy.test/k8s/clusters/c1/apis/coordination.k8s.io/v1/namespaces/"
            "kube-system/leases/lock");
  EXPECT_EQ(requests[1].url,
            "https://proxy.test/k8s/clusters/c1/apis/admissionregistration.k8s.io/v1/"
            "validatingwebhookconfigurations/hook.example.com");
  EXPECT_EQ(requests[2].url,
            "https://proxy.test/k8s/clusters/c1/apis/apiextensions.k8s.io/v1/"
            "customresourcedefinitions/widgets.example.com");
  EXPECT_EQ(requests[3].url,
            "https://proxy.test/k8s/clusters/c1/api/v1/namespaces/infra/secrets/odd%20name%2Fx");
}

TEST_F(RestClientTest, RejectsMissingNamesAndNamespaces) {
  auto client = NewClient();
  auto no_ns = client->Get(kSecrets, "", "x");
  ASSERT_FALSE(no_ns);
  EXPECT_EQ(no_ns.error().code(), ErrorCode::kInvalidArgument);
  auto no_name = client->Update(kSecrets, "infra", "", Json{{"metadata", Json::object()}});
  ASSERT_FALSE(no_name);
  EXPECT_EQ(no_name.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(server_.requests().empty());
  ClusterConfig no_scheme;
  no_scheme.server = "api.test";
  EXPECT_FALSE(MakeRestClient(no_scheme, server_.NewTransport(), {}, clock_));
}

TEST_F(RestClientTest, GetOfAMissingObjectIsEmptyNotAnError) {
  server_.Script("GET", kSecretPath,
                 {FakeReply::Status(404, "NotFound", "secrets \"webhook-server-cert\" not found")});
  auto secret = NewClient()->Get(kSecrets, "infra", "webhook-server-cert");
  ASSERT_TRUE(secret) << secret.error().message();
  EXPECT_FALSE(secret->has_value());
}

TEST_F(RestClientTest, ListFollowsContinueTokensWithEncodedSelectors) {
  server_.SetHandler([](const HttpRequest& request) {
    const auto token = FakeTransport::QueryParam(request.url, "continue");
    if (!token) {
      return FakeReply::Json(200, {{"kind", "SecretList"},
                                   {"metadata", {{"resourceVersion", "42"}, {"continue", "p 2"}}},
                                   {"items", {Secret("a"), Secret("b")}}});
    }
    if (*token == "p%202") {
      return FakeReply::Json(200, {{"metadata", {{"resourceVersion", "42"}, {"continue", "p3"}}},
                                   {"items", {Secret("c")}}});
    }
    return FakeReply::Json(200, {{"metadata", {{"resourceVersion", "42"}}}, {"items", nullptr}});
  });
  ListOptions options;
  options.label_selector = "app in (a,b),tier!=db";
  options.field_selector = "metadata.name=a";
  options.page_size = 2;
  auto list = NewClient()->List(kSecrets, "infra", options);
  ASSERT_TRUE(list) << list.error().message();
  ASSERT_EQ((*list)["items"].size(), 3u);
  EXPECT_EQ((*list)["items"][2]["metadata"]["name"], "c");
  EXPECT_EQ((*list)["metadata"]["resourceVersion"], "42");

  const auto requests = server_.requests();
  ASSERT_EQ(requests.size(), 3u);
  for (const HttpRequest& request : requests) {
    EXPECT_EQ(FakeTransport::PathOf(request.url), kSecretsPath);
    EXPECT_EQ(FakeTransport::QueryParam(request.url, "limit"), "2");
    EXPECT_EQ(FakeTransport::QueryParam(request.url, "labelSelector"),
              "app%20in%20%28a%2Cb%29%2Ctier%21%3Ddb");
    EXPECT_EQ(FakeTransport::QueryParam(request.url, "fieldSelector"), "metadata.name%3Da");
  }
}

TEST_F(RestClientTest, ListAcrossNamespacesUsesTheBareCollection) {
  server_.Script("GET", "/api/v1/secrets",
                 {FakeReply::Json(200, {{"metadata", {{"resourceVersion", "7"}}}, {"items", {}}})});
  auto list = NewClient()->List(kSecrets, "", {});
  ASSERT_TRUE(list) << list.error().message();
  EXPECT_TRUE((*list)["items"].empty());
}

TEST_F(RestClientTest, CreateSendsJsonWithoutResourceVersion) {
  server_.SetHandler([](const HttpRequest& request) {
    Json created = Json::parse(request.body);
    created["metadata"]["resourceVersion"] = "5";
    return FakeReply::Json(201, created);
  });
  auto created = NewClient()->Create(kSecrets, "infra", Secret("new", "99"));
  ASSERT_TRUE(created) << created.error().message();
  EXPECT_EQ((*created)["metadata"]["resourceVersion"], "5");

  const HttpRequest request = server_.requests().at(0);
  EXPECT_EQ(request.method, "POST");
  EXPECT_EQ(FakeTransport::PathOf(request.url), kSecretsPath);
  EXPECT_EQ(FakeTransport::Header(request, "Content-Type"), "application/json");
  const Json sent = Json::parse(request.body);
  EXPECT_FALSE(sent["metadata"].contains("resourceVersion"));
  EXPECT_EQ(sent["metadata"]["name"], "new");
}

TEST_F(RestClientTest, CreateTakesTheNamespaceFromTheObject) {
  server_.Script("POST", kSecretsPath, {FakeReply::Json(201, Secret("new"))});
  ASSERT_TRUE(NewClient()->Create(kSecrets, "", Secret("new")));
}

TEST_F(RestClientTest, UpdatePutsToTheNameAskedFor) {
  server_.Script("PUT", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/vw",
                 {FakeReply::Json(200, {{"metadata", {{"name", "vw"}}}})});
  Json hook = {{"metadata", {{"name", "vw"}, {"resourceVersion", "12"}}},
               {"webhooks", Json::array()}};
  auto updated = NewClient()->Update(kValidatingWebhookConfigurations, "", "vw", hook);
  ASSERT_TRUE(updated) << updated.error().message();
  const HttpRequest request = server_.requests().at(0);
  EXPECT_EQ(FakeTransport::Header(request, "Content-Type"), "application/json");
  EXPECT_EQ(Json::parse(request.body), hook);  // resourceVersion kept: the update is conditional
}

TEST_F(RestClientTest, PatchUsesThePatchMediaTypes) {
  server_.SetHandler([](const HttpRequest&) { return FakeReply::Json(200, Secret("s")); });
  auto client = NewClient();
  ASSERT_TRUE(client->Patch(kSecrets, "infra", "s", PatchType::kMerge, {{"data", {}}}));
  ASSERT_TRUE(client->Patch(kSecrets, "infra", "s", PatchType::kJsonPatch,
                            Json::array({{{"op", "test"}, {"path", "/type"}, {"value", "x"}}})));
  ASSERT_TRUE(client->Patch(kSecrets, "infra", "s", PatchType::kStrategicMerge, {{"data", {}}}));
  const auto requests = server_.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].method, "PATCH");
  EXPECT_EQ(FakeTransport::Header(requests[0], "Content-Type"), "application/merge-patch+json");
  EXPECT_EQ(FakeTransport::Header(requests[1], "Content-Type"), "application/json-patch+json");
  EXPECT_EQ(FakeTransport::Header(requests[2], "Content-Type"),
            "application/strategic-merge-patch+json");
  EXPECT_TRUE(Json::parse(requests[1].body).is_array());
}

TEST_F(RestClientTest, EveryWriteNamesTheFieldManagerCertctl) {
  server_.SetHandler([](const HttpRequest& request) {
    return FakeReply::Json(request.method == "POST" ? 201 : 200, Secret("s", "3"));
  });
  auto client = NewClient();
  ASSERT_TRUE(client->Create(kSecrets, "infra", Secret("s")));
  ASSERT_TRUE(client->Update(kSecrets, "infra", "s", Secret("s", "2")));
  ASSERT_TRUE(client->Patch(kSecrets, "infra", "s", PatchType::kMerge, {{"data", {}}}));
  ASSERT_TRUE(client->Get(kSecrets, "infra", "s"));
  const auto requests = server_.requests();
  ASSERT_EQ(requests.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(FakeTransport::QueryParam(requests[i].url, "fieldManager"), "certctl")
        << requests[i].method << " " << requests[i].url;
  }
  EXPECT_FALSE(FakeTransport::QueryParam(requests[3].url, "fieldManager").has_value())
      << requests[3].url;
}

TEST_F(RestClientTest, DeleteMapsAMissingObjectToNotFound) {
  server_.Script("DELETE", kSecretPath,
                 {FakeReply::Json(200, {{"kind", "Status"}, {"status", "Success"}}),
                  FakeReply::Status(404, "NotFound", "secrets \"webhook-server-cert\" not found")});
  auto client = NewClient();
  EXPECT_TRUE(client->Delete(kSecrets, "infra", "webhook-server-cert"));
  auto again = client->Delete(kSecrets, "infra", "webhook-server-cert");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code(), ErrorCode::kNotFound);
}

// ---- Errors -----------------------------------------------------------------------------------

TEST_F(RestClientTest, ErrorsCarryContextCodeAndServerMessage) {
  server_.Script("GET", kSecretPath,
                 {FakeReply::Status(403, "Forbidden",
                                    "secrets \"webhook-server-cert\" is forbidden: User "
                                    "\"system:serviceaccount:infra:certctl\" cannot get resource "
                                    "\"secrets\"")});
  server_.Script("PUT", kSecretPath,
                 {FakeReply::Status(409, "Conflict", "the object has been modified")});
  server_.Script("POST", kSecretsPath,
                 {FakeReply::Status(409, "AlreadyExists", "secrets \"x\" already exists")});
  auto client = NewClient();

  auto get = client->Get(kSecrets, "infra", "webhook-server-cert");
  ASSERT_FALSE(get);
  EXPECT_EQ(get.error().code(), ErrorCode::kPermissionDenied);
  EXPECT_EQ(get.error().message().rfind(
                "get secrets infra/webhook-server-cert: secrets \"webhook-server-cert\" is "
                "forbidden: User",
                0),
            0u);

  auto update =
      client->Update(kSecrets, "infra", "webhook-server-cert", Secret("webhook-server-cert"));
  ASSERT_FALSE(update);
  EXPECT_EQ(update.error().code(), ErrorCode::kConflict);
  EXPECT_EQ(update.error().message(),
            "update secrets infra/webhook-server-cert: the object has been modified");

  auto create = client->Create(kSecrets, "infra", Secret("x"));
  ASSERT_FALSE(create);
  EXPECT_EQ(create.error().code(), ErrorCode::kAlreadyExists);
}

TEST_F(RestClientTest, UndecodableSuccessBodyIsAnErrorThatDoesNotQuoteIt) {
  server_.Script("GET", kSecretPath, {FakeReply::Text(200, "tls.key: c2VjcmV0 not json")});
  auto get = NewClient()->Get(kSecrets, "infra", "webhook-server-cert");
  ASSERT_FALSE(get);
  EXPECT_EQ(get.error().code(), ErrorCode::kBadResponse);
  EXPECT_EQ(get.error().message().find("c2VjcmV0"), std::string::npos);
}

// ---- Retries ----------------------------------------------------------------------------------

TEST_F(RestClientTest, RetryAfterIsHonouredForAnyVerb) {
  server_.Script(
      "POST", kSecretsPath,
      {FakeReply::Text(429, "Too many requests, please try again later.")
           .WithHeader("retry-after", "2"),
       FakeReply::Status(503, "ServiceUnavailable", "busy").WithHeader("retry-after", "5"),
       FakeReply::Json(201, Secret("new"))});
  auto created = NewClient()->Create(kSecrets, "infra", Secret("new"));
  ASSERT_TRUE(created) << created.error().message();
  EXPECT_EQ(server_.CountRequests("POST", kSecretsPath), 3u);
  EXPECT_EQ(sleeps(), (std::vector<milliseconds>{milliseconds(2000), milliseconds(5000)}));
}

TEST_F(RestClientTest, RetryAfterRetriesStopAfterMaxRetries) {
  options_.retry.max_retries = 3;
  server_.Script("GET", kSecretPath,
                 {FakeReply::Text(429, "Too many requests, please try again later.")
                      .WithHeader("retry-after", "1")});
  auto get = NewClient()->Get(kSecrets, "infra", "webhook-server-cert");
  ASSERT_FALSE(get);
  EXPECT_EQ(get.error().code(), ErrorCode::kUnavailable);
  ASSERT_TRUE(get.error().retry_after().has_value());
  EXPECT_EQ(*get.error().retry_after(), std::chrono::seconds(1));
  EXPECT_EQ(server_.CountRequests("GET", kSecretPath), 4u);
  EXPECT_EQ(sleeps(), std::vector<milliseconds>(3, milliseconds(1000)));
}

TEST_F(RestClientTest, UnguardedWritesAreRetriedOnlyAfterA429) {
  // Without a resourceVersion, or as a merge patch, a write that may have reached the server
  // must not run twice; a 429 says the server did nothing.
  Json unconditional = Secret("webhook-server-cert");
  unconditional["metadata"].erase("resourceVersion");
  server_.Script("PUT", kSecretPath,
                 {FakeReply::Status(503, "ServiceUnavailable", "busy"),
                  FakeReply::Json(200, Secret("webhook-server-cert"))});
  server_.Script("PATCH", kSecretPath,
                 {FakeReply::Failure("Connection reset by peer"),
                  FakeReply::Text(429, "Too many requests, please try again later."),
                  FakeReply::Json(200, Secret("webhook-server-cert"))});
  server_.Script("DELETE", kSecretPath, {FakeReply::Failure("Connection reset by peer")});
  auto client = NewClient();
  auto update = client->Update(kSecrets, "infra", "webhook-server-cert", unconditional);
  ASSERT_FALSE(update);
  EXPECT_EQ(update.error().code(), ErrorCode::kUnavailable);
  auto reset = client->Patch(kSecrets, "infra", "webhook-server-cert", PatchType::kMerge, {});
  ASSERT_FALSE(reset);
  EXPECT_EQ(reset.error().message(),
            "patch secrets infra/webhook-server-cert: Connection reset by peer");
  auto patch = client->Patch(kSecrets, "infra", "webhook-server-cert", PatchType::kMerge, {});
  ASSERT_TRUE(patch) << patch.error().message();
  EXPECT_FALSE(client->Delete(kSecrets, "infra", "webhook-server-cert"));
  EXPECT_EQ(server_.CountRequests("PUT", kSecretPath), 1u);
  EXPECT_EQ(server_.CountRequests("PATCH", kSecretPath), 3u);
  EXPECT_EQ(server_.CountRequests("DELETE", kSecretPath), 1u);
  EXPECT_EQ(sleeps().size(), 1u);
}

TEST_F(RestClientTest, EveryExchangeIsReportedRetriesIncluded) {
  std::vector<std::pair<std::string, int>> exchanges;
  options_.on_response = [&](const std::string& method, int status) {
    exchanges.emplace_back(method, status);
  };
  server_.Script("GET", kSecretPath,
                 {FakeReply::Failure("Connection reset by peer"),
                  FakeReply::Status(503, "ServiceUnavailable", "busy"),
                  FakeReply::Json(200, Secret("webhook-server-cert"))});
  server_.Script("DELETE", kSecretPath, {FakeReply::Status(403, "Forbidden", "no")});
  auto client = NewClient();
  ASSERT_TRUE(client->Get(kSecrets, "infra", "webhook-server-cert"));
  EXPECT_FALSE(client->Delete(kSecrets, "infra", "webhook-server-cert"));
  EXPECT_EQ(exchanges, (std::vector<std::pair<std::string, int>>{
                           {"GET", 0}, {"GET", 503}, {"GET", 200}, {"DELETE", 403}}));
}

TEST_F(RestClientTest, GuardedWritesRideOutTransientFailures) {
  server_.Script("POST", kSecretsPath,
                 {FakeReply::Status(503, "ServiceUnavailable", "busy"),
                  FakeReply::Failure("Connection reset by peer"),
                  FakeReply::Json(201, Secret("webhook-server-cert"))});
  server_.Script("PUT", kSecretPath,
                 {FakeReply::Status(500, "InternalError", "etcd hiccup"),
                  FakeReply::Failure("Operation timed out"),
                  FakeReply::Json(200, Secret("webhook-server-cert", "7"))});
  const std::string vwc =
      "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/vw";
  server_.Script("PATCH", vwc,
                 {FakeReply::Status(504, "Timeout", "request timed out"),
                  FakeReply::Json(200, {{"metadata", {{"name", "vw"}}}})});
  auto client = NewClient();
  auto created = client->Create(kSecrets, "infra", Secret("webhook-server-cert"));
  ASSERT_TRUE(created) << created.error().message();
  auto updated =
      client->Update(kSecrets, "infra", "webhook-server-cert", Secret("webhook-server-cert", "6"));
  ASSERT_TRUE(updated) << updated.error().message();
  const Json guarded = Json::array(
      {{{"op", "test"}, {"path", "/webhooks/0/name"}, {"value", "a.example.com"}},
       {{"op", "add"}, {"path", "/webhooks/0/clientConfig/caBundle"}, {"value", "Q0E="}}});
  auto patched =
      client->Patch(kValidatingWebhookConfigurations, "", "vw", PatchType::kJsonPatch, guarded);
  ASSERT_TRUE(patched) << patched.error().message();
  EXPECT_EQ(server_.CountRequests("POST", kSecretsPath), 3u);
  EXPECT_EQ(server_.CountRequests("PUT", kSecretPath), 3u);
  EXPECT_EQ(server_.CountRequests("PATCH", vwc), 2u);
  EXPECT_EQ(sleeps().size(), 5u);
}

TEST_F(RestClientTest, RetryAfterIsCappedAndEveryWaitIsReported) {
  std::vector<std::string> reported;
  options_.retry.on_retry = [&reported](const std::string& message) {
    reported.push_back(message);
  };
  server_.Script(
      "GET", kSecretPath,
      {FakeReply::Status(429, "TooManyRequests", "slow down").WithHeader("retry-after", "3600"),
       FakeReply::Status(503, "ServiceUnavailable", "busy"),
       FakeReply::Json(200, Secret("webhook-server-cert"))});
  auto get = NewClient()->Get(kSecrets, "infra", "webhook-server-cert");
  ASSERT_TRUE(get) << get.error().message();
  ASSERT_EQ(sleeps().size(), 2u);
  EXPECT_EQ(sleeps()[0], milliseconds(10000));  // not an hour
  ASSERT_EQ(reported.size(), 2u);
  EXPECT_EQ(reported[0],
            "get secrets infra/webhook-server-cert: HTTP 429 (slow down); retrying in 10s (the "
            "server asked for Retry-After 3600s, honoured for at most 10s)");
  EXPECT_EQ(reported[1].rfind("get secrets infra/webhook-server-cert: HTTP 503 (busy); "
                              "retrying in ",
                              0),
            0u)
      << reported[1];
}

TEST_F(RestClientTest, ADeadlineBoundsRetriesAndNoWaitPassesIt) {
  options_.retry.max_retries = -1;
  options_.retry.deadline = clock_.Now() + std::chrono::seconds(3);
  server_.Script(
      "GET", kSecretPath,
      {FakeReply::Status(429, "TooManyRequests", "slow down").WithHeader("retry-after", "3600")});
  auto get = NewClient()->Get(kSecrets, "infra", "webhook-server-cert");
  ASSERT_FALSE(get);
  EXPECT_EQ(get.error().code(), ErrorCode::kUnavailable);
  // One wait to the deadline, a last try there, then the 429 is the answer.
  EXPECT_EQ(sleeps(), (std::vector<milliseconds>{milliseconds(3000)}));
  EXPECT_EQ(server_.CountRequests("GET", kSecretPath), 2u);
}

TEST_F(RestClientTest, WithoutARetryLimitTheDeadlineAloneEndsRetries) {
  options_.retry.max_retries = -1;
  options_.retry.deadline = clock_.Now() + std::chrono::seconds(30);
  server_.Script("GET", kSecretPath, {FakeReply::Failure("Connection refused")});
  auto get = NewClient()->Get(kSecrets, "infra", "webhook-server-cert");
  ASSERT_FALSE(get);
  milliseconds waited{0};
  for (const milliseconds sleep : sleeps()) {
    EXPECT_LE(sleep, milliseconds(7500));  // the 5 s cap plus up to half of it as jitter
    waited += sleep;
  }
  EXPECT_EQ(waited, milliseconds(30000));
  EXPECT_GT(server_.requests().size(), 6u);
}

TEST_F(RestClientTest, TlsVerificationFailuresAnd403AreNeverRetried) {
  server_.Script("GET", kSecretPath,
                 {FakeReply::Failure("SSL peer certificate or SSH remote key was not OK",
                                     ErrorCode::kUnauthenticated)});
  server_.Script("PUT", kSecretPath, {FakeReply::Status(403, "Forbidden", "forbidden")});
  options_.retry.max_retries = -1;
  auto client = NewClient();
  auto get = client->Get(kSecrets, "infra", "webhook-server-cert");
  ASSERT_FALSE(get);
  EXPECT_EQ(get.error().code(), ErrorCode::kUnauthenticated);
  auto update =
      client->Update(kSecrets, "infra", "webhook-server-cert", Secret("webhook-server-cert"));
  ASSERT_FALSE(update);
  EXPECT_EQ(update.error().code(), ErrorCode::kPermissionDenied);
  EXPECT_EQ(server_.requests().size(), 2u);
  EXPECT_TRUE(sleeps().empty());
}

TEST_F(RestClientTest, ReadsRetryTransportErrorsAndBare5xxWithBackoff) {
  server_.Script("GET", kSecretPath,
                 {FakeReply::Failure("Connection refused"),
                  FakeReply::Status(500, "InternalError", "etcd hiccup"),
                  FakeReply::Failure("Connection reset by peer"),
                  FakeReply::Json(200, Secret("webhook-server-cert"))});
  auto get = NewClient()->Get(kSecrets, "infra", "webhook-server-cert");
  ASSERT_TRUE(get) << get.error().message();
  ASSERT_EQ(sleeps().size(), 3u);
  // Exponential from 250 ms, with up to 50% jitter on top.
  EXPECT_GE(sleeps()[0], milliseconds(250));
  EXPECT_LE(sleeps()[0], milliseconds(375));
  EXPECT_GE(sleeps()[1], milliseconds(500));
  EXPECT_LE(sleeps()[1], milliseconds(750));
  EXPECT_GE(sleeps()[2], milliseconds(1000));
  EXPECT_LE(sleeps()[2], milliseconds(1500));
}

TEST_F(RestClientTest, ReadsGiveUpAfterAFewAttempts) {
  server_.Script("GET", kSecretsPath, {FakeReply::Failure("Connection refused")});
  auto list = NewClient()->List(kSecrets, "infra", {});
  ASSERT_FALSE(list);
  EXPECT_EQ(list.error().code(), ErrorCode::kUnavailable);
  // The attempts and the time they took, not only the last attempt's words.
  EXPECT_THAT(list.error().message(),
              ::testing::MatchesRegex("list secrets in namespace infra: Connection refused "
                                      "\\(5 attempts in [0-9]+(\\.[0-9])?s\\)"));
  EXPECT_EQ(server_.requests().size(), 5u);
  for (const milliseconds sleep : sleeps()) {
    EXPECT_LE(sleep, milliseconds(6000));
  }
}

// ---- Untrusted answers -------------------------------------------------------------------------

TEST_F(RestClientTest, AnAnswerForAnotherObjectIsRefused) {
  Json foreign_ns = Secret("webhook-server-cert");
  foreign_ns["metadata"]["namespace"] = "kube-system";
  server_.Script("GET", kSecretPath,
                 {FakeReply::Json(200, Secret("victim")), FakeReply::Json(200, foreign_ns)});
  server_.Script("PUT", kSecretPath, {FakeReply::Json(200, Secret("victim"))});
  auto client = NewClient();
  auto renamed = client->Get(kSecrets, "infra", "webhook-server-cert");
  ASSERT_FALSE(renamed);
  EXPECT_EQ(renamed.error().code(), ErrorCode::kBadResponse);
  EXPECT_EQ(renamed.error().message(),
            "get secrets infra/webhook-server-cert: the server answered with another object, "
            "named \"victim\"; nothing was written to it");
  auto moved = client->Get(kSecrets, "infra", "webhook-server-cert");
  ASSERT_FALSE(moved);
  EXPECT_NE(moved.error().message().find("\"kube-system\""), std::string::npos);
  auto update =
      client->Update(kSecrets, "infra", "webhook-server-cert", Secret("webhook-server-cert"));
  ASSERT_FALSE(update);
  EXPECT_EQ(update.error().code(), ErrorCode::kBadResponse);
  for (const HttpRequest& request : server_.requests()) {
    EXPECT_EQ(request.url.find("victim"), std::string::npos) << request.url;
  }
}

TEST_F(RestClientTest, UpdateGoesToTheNameAskedForAndRefusesAMismatchedBody) {
  auto mismatched = NewClient()->Update(kSecrets, "infra", "webhook-server-cert", Secret("victim"));
  ASSERT_FALSE(mismatched);
  EXPECT_EQ(mismatched.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(server_.requests().empty());
}

TEST_F(RestClientTest, FieldsOfTheWrongTypeAreErrorsNamingTheField) {
  Json numbered = Secret("webhook-server-cert");
  numbered["metadata"]["name"] = 123;
  Json scalar_metadata = Secret("webhook-server-cert");
  scalar_metadata["metadata"] = "webhook-server-cert";
  server_.Script("GET", kSecretPath,
                 {FakeReply::Json(200, numbered), FakeReply::Json(200, scalar_metadata)});
  server_.Script(
      "GET", kSecretsPath,
      {FakeReply::Json(200, {{"items", "none"}}),
       FakeReply::Json(200, {{"items", Json::array({7})}}),
       FakeReply::Json(200, {{"items", Json::array()}, {"metadata", {{"continue", 5}}}})});
  auto client = NewClient();
  auto name = client->Get(kSecrets, "infra", "webhook-server-cert");
  ASSERT_FALSE(name);
  EXPECT_EQ(name.error().code(), ErrorCode::kBadResponse);
  EXPECT_EQ(name.error().message(),
            "get secrets infra/webhook-server-cert: metadata.name is a number, not a string");
  auto metadata = client->Get(kSecrets, "infra", "webhook-server-cert");
  ASSERT_FALSE(metadata);
  EXPECT_EQ(metadata.error().message(),
            "get secrets infra/webhook-server-cert: metadata is a string, not an object");
  for (const char* field : {"items is a string, not an array", "an item of the list",
                            "metadata.continue is a number, not a string"}) {
    auto list = client->List(kSecrets, "infra", {});
    ASSERT_FALSE(list);
    EXPECT_EQ(list.error().code(), ErrorCode::kBadResponse);
    EXPECT_NE(list.error().message().find(field), std::string::npos) << list.error().message();
  }
}

TEST_F(RestClientTest, ListStopsWhenContinueTokensCycle) {
  int page = 0;
  server_.SetHandler([&page](const HttpRequest&) {
    const char* token = page++ % 2 == 0 ? "a" : "b";
    return FakeReply::Json(200, {{"items", Json::array({Secret("s")})},
                                 {"metadata", {{"resourceVersion", "9"}, {"continue", token}}}});
  });
  auto list = NewClient()->List(kSecrets, "infra", {});
  ASSERT_FALSE(list);
  EXPECT_EQ(list.error().code(), ErrorCode::kBadResponse);
  EXPECT_NE(list.error().message().find("repeated a continue token"), std::string::npos);
  EXPECT_EQ(server_.requests().size(), 3u);
}

TEST_F(RestClientTest, ListStopsAfterABoundedNumberOfPages) {
  int page = 0;
  server_.SetHandler([&page](const HttpRequest&) {
    return FakeReply::Json(
        200, {{"items", Json::array()}, {"metadata", {{"continue", std::to_string(page++)}}}});
  });
  auto list = NewClient()->List(kSecrets, "infra", {});
  ASSERT_FALSE(list);
  EXPECT_EQ(list.error().code(), ErrorCode::kBadResponse);
  EXPECT_NE(list.error().message().find("after 1000 pages"), std::string::npos);
  EXPECT_EQ(server_.requests().size(), 1000u);
}

TEST_F(RestClientTest, StatusMessagesArePrintableAndClipped) {
  const std::string hostile =
      "line one\nline two\r\x1b[31mred\x1b[0m\t" + std::string(1024 * 1024, 'A');
  server_.Script("GET", kSecretPath, {FakeReply::Status(403, "Forbidden", hostile)});
  auto get = NewClient()->Get(kSecrets, "infra", "webhook-server-cert");
  ASSERT_FALSE(get);
  const std::string& message = get.error().message();
  EXPECT_EQ(
      message.rfind("get secrets infra/webhook-server-cert: line one line two [31mred [0m A", 0),
      0u)
      << message.substr(0, 200);
  EXPECT_LT(message.size(), 500u);
  for (const char c : message) {
    EXPECT_GE(static_cast<unsigned char>(c), 0x20);
  }
}

// ---- Credentials ------------------------------------------------------------------------------

TEST_F(RestClientTest, UnauthorizedReReadsTheTokenFileAndRetriesOnce) {
  TempDir dir;
  config_.token.clear();
  config_.token_file = dir.Write("token", "old-token").string();
  std::string accepted = "old-token";
  server_.SetHandler([&accepted](const HttpRequest& request) {
    if (FakeTransport::Header(request, "Authorization") != "Bearer " + accepted) {
      return FakeReply::Status(401, "Unauthorized", "Unauthorized");
    }
    return FakeReply::Json(200, Secret("webhook-server-cert"));
  });
  auto client = NewClient();
  ASSERT_TRUE(client->Get(kSecrets, "infra", "webhook-server-cert"));

  // The kubelet rotates the token and the server stops accepting the old one, well before the
  // client's once-a-minute re-read.
  dir.Write("token", "new-token");
  accepted = "new-token";
  auto get = client->Get(kSecrets, "infra", "webhook-server-cert");
  ASSERT_TRUE(get) << get.error().message();
  EXPECT_EQ(server_.requests().size(), 3u);
  EXPECT_EQ(FakeTransport::Header(server_.requests().back(), "Authorization"), "Bearer new-token");

  // A token the server never accepts: one retry, then the 401 is the answer.
  accepted = "something-else";
  auto rejected = client->Get(kSecrets, "infra", "webhook-server-cert");
  ASSERT_FALSE(rejected);
  EXPECT_EQ(rejected.error().code(), ErrorCode::kUnauthenticated);
  EXPECT_EQ(server_.requests().size(), 5u);
}

TEST_F(RestClientTest, StaticTokenIsNotRetriedOn401) {
  server_.Script("GET", kSecretPath, {FakeReply::Status(401, "Unauthorized", "Unauthorized")});
  auto get = NewClient()->Get(kSecrets, "infra", "webhook-server-cert");
  ASSERT_FALSE(get);
  EXPECT_EQ(get.error().code(), ErrorCode::kUnauthenticated);
  EXPECT_EQ(get.error().message(), "get secrets infra/webhook-server-cert: Unauthorized");
  EXPECT_EQ(server_.requests().size(), 1u);
}

TEST_F(RestClientTest, TheTokenNeverAppearsInAnyErrorMessage) {
  server_.SetHandler([](const HttpRequest& request) {
    const std::string path = FakeTransport::PathOf(request.url);
    if (path.find("/a") != std::string::npos) {
      return FakeReply::Status(401, "Unauthorized", "Unauthorized");
    }
    if (path.find("/b") != std::string::npos) {
      return FakeReply::Failure("TLS handshake failed");
    }
    if (path.find("/c") != std::string::npos) {
      return FakeReply::Text(429, "Too many requests").WithHeader("retry-after", "1");
    }
    return FakeReply::Status(403, "Forbidden", "forbidden");
  });
  options_.retry.max_retries = 1;
  auto client = NewClient();
  std::vector<Error> errors;
  for (const char* name : {"a", "b", "c", "d"}) {
    auto get = client->Get(kSecrets, "infra", name);
    ASSERT_FALSE(get);
    errors.push_back(get.error());
    auto patch = client->Patch(kSecrets, "infra", name, PatchType::kMerge, {});
    ASSERT_FALSE(patch);
    errors.push_back(patch.error());
  }
  auto watch = client->Watch(
      kSecrets, "infra", {}, [](const WatchEvent&) { return true; }, [] { return false; });
  ASSERT_FALSE(watch);
  errors.push_back(watch.error());
  for (const Error& error : errors) {
    EXPECT_EQ(error.message().find(kToken), std::string::npos) << error.message();
    EXPECT_EQ(error.message().find("Bearer"), std::string::npos) << error.message();
  }
}

TEST_F(RestClientTest, UnreadableTokenFileFailsBeforeSending) {
  TempDir dir;
  config_.token.clear();
  config_.token_file = (dir / "token").string();
  auto get = NewClient()->Get(kSecrets, "infra", "webhook-server-cert");
  ASSERT_FALSE(get);
  EXPECT_EQ(get.error().code(), ErrorCode::kUnauthenticated);
  EXPECT_EQ(get.error().message().rfind("get secrets infra/webhook-server-cert: ", 0), 0u);
  EXPECT_TRUE(server_.requests().empty());
}

// ---- Rate limiting ----------------------------------------------------------------------------

TEST_F(RestClientTest, ClientSideRateLimitSpacesRequests) {
  options_.qps = 5;
  options_.burst = 2;
  server_.SetHandler([](const HttpRequest&) { return FakeReply::Json(200, Secret("s")); });
  auto client = NewClient();
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(client->Get(kSecrets, "infra", "s"));
  }
  EXPECT_EQ(server_.requests().size(), 4u);
  EXPECT_EQ(sleeps(), std::vector<milliseconds>(2, milliseconds(200)));
}

// ---- Watch ------------------------------------------------------------------------------------

Json Event(const std::string& type, const Json& object) {
  return {{"type", type}, {"object", object}};
}

Json Bookmark(const std::string& rv) {
  return Event("BOOKMARK", {{"kind", "Secret"}, {"metadata", {{"resourceVersion", rv}}}});
}

class RestClientWatchTest : public RestClientTest {
 protected:
  // Runs a watch to its end and returns what it delivered.
  Status RunWatch(const WatchOptions& options, std::vector<WatchEvent>& events,
                  std::size_t stop_after = 0) {
    auto client = NewClient();
    return client->Watch(
        kSecrets, "infra", options,
        [&](const WatchEvent& event) {
          events.push_back(event);
          return stop_after == 0 || events.size() < stop_after;
        },
        [] { return false; });
  }
};

TEST_F(RestClientWatchTest, DeliversEventsAndBookmarksWithTheRightQuery) {
  server_.Script(
      "GET", kSecretsPath,
      {FakeReply::Events({Event("ADDED", Secret("a", "10")), Event("MODIFIED", Secret("a", "11")),
                          Bookmark("15"), Event("DELETED", Secret("a", "16"))})});
  WatchOptions options;
  options.resource_version = "9";
  options.label_selector = "app=x";
  options.server_timeout = std::chrono::seconds(330);
  std::vector<WatchEvent> events;
  ASSERT_TRUE(RunWatch(options, events));
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].type, WatchEventType::kAdded);
  EXPECT_EQ(events[1].type, WatchEventType::kModified);
  EXPECT_EQ(events[2].type, WatchEventType::kBookmark);
  EXPECT_EQ(events[2].object["metadata"]["resourceVersion"], "15");
  EXPECT_EQ(events[3].type, WatchEventType::kDeleted);

  const HttpRequest request = server_.requests().at(0);
  EXPECT_EQ(request.method, "GET");
  EXPECT_EQ(FakeTransport::QueryParam(request.url, "watch"), "1");
  EXPECT_EQ(FakeTransport::QueryParam(request.url, "resourceVersion"), "9");
  EXPECT_EQ(FakeTransport::QueryParam(request.url, "allowWatchBookmarks"), "true");
  EXPECT_EQ(FakeTransport::QueryParam(request.url, "timeoutSeconds"), "330");
  EXPECT_EQ(FakeTransport::QueryParam(request.url, "labelSelector"), "app%3Dx");
  EXPECT_EQ(FakeTransport::Header(request, "Accept"), "application/json");
  EXPECT_EQ(FakeTransport::Header(request, "Authorization"), "Bearer " + std::string(kToken));
  EXPECT_GT(request.timeout, std::chrono::milliseconds(std::chrono::seconds(330)));
}

TEST_F(RestClientWatchTest, WithoutBookmarksOrResourceVersion) {
  server_.Script("GET", kSecretsPath, {FakeReply::Events({})});
  WatchOptions options;
  options.allow_bookmarks = false;
  std::vector<WatchEvent> events;
  ASSERT_TRUE(RunWatch(options, events));
  const std::string url = server_.requests().at(0).url;
  EXPECT_FALSE(FakeTransport::QueryParam(url, "allowWatchBookmarks").has_value());
  EXPECT_FALSE(FakeTransport::QueryParam(url, "resourceVersion").has_value());
}

TEST_F(RestClientWatchTest, StreamSplitIntoSingleBytesDecodesTheSame) {
  FakeReply reply = FakeReply::Events({Event("ADDED", Secret("a", "10")), Bookmark("11")});
  std::string whole;
  for (const auto& chunk : reply.chunks) {
    whole += chunk;
  }
  reply.chunks.clear();
  for (const char c : whole) {
    reply.chunks.emplace_back(1, c);
  }
  server_.Script("GET", kSecretsPath, {reply});
  std::vector<WatchEvent> events;
  ASSERT_TRUE(RunWatch({}, events));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].object, Secret("a", "10"));
  EXPECT_EQ(events[1].type, WatchEventType::kBookmark);
}

TEST_F(RestClientWatchTest, Error410EndsTheWatchAsExpired) {
  server_.Script(
      "GET", kSecretsPath,
      {FakeReply::Events({Event("ADDED", Secret("a", "10")),
                          Event("ERROR", {{"kind", "Status"},
                                          {"status", "Failure"},
                                          {"message", "too old resource version: 9 (12)"},
                                          {"reason", "Expired"},
                                          {"code", 410}}),
                          Event("ADDED", Secret("never", "13"))})});
  std::vector<WatchEvent> events;
  auto watched = RunWatch({}, events);
  ASSERT_FALSE(watched);
  EXPECT_EQ(watched.error().code(), ErrorCode::kExpired);
  EXPECT_EQ(watched.error().message(),
            "watch secrets in namespace infra: too old resource version: 9 (12)");
  ASSERT_EQ(events.size(), 1u);
}

TEST_F(RestClientWatchTest, OtherErrorEventsAreMapped) {
  server_.Script("GET", kSecretsPath,
                 {FakeReply::Events({Event("ERROR", {{"kind", "Status"},
                                                     {"message", "internal error"},
                                                     {"reason", "InternalError"},
                                                     {"code", 500}})})});
  std::vector<WatchEvent> events;
  auto watched = RunWatch({}, events);
  ASSERT_FALSE(watched);
  EXPECT_EQ(watched.error().code(), ErrorCode::kUnavailable);
}

TEST_F(RestClientWatchTest, NonSuccessResponseIsMapped) {
  server_.Script("GET", kSecretsPath,
                 {FakeReply::Status(403, "Forbidden", "secrets is forbidden: cannot watch")});
  std::vector<WatchEvent> events;
  auto watched = RunWatch({}, events);
  ASSERT_FALSE(watched);
  EXPECT_EQ(watched.error().code(), ErrorCode::kPermissionDenied);
  EXPECT_EQ(watched.error().message(),
            "watch secrets in namespace infra: secrets is forbidden: cannot watch");
}

TEST_F(RestClientWatchTest, RetryAfterAppliesToTheInitialResponse) {
  server_.Script("GET", kSecretsPath,
                 {FakeReply::Text(429, "Too many requests, please try again later.")
                      .WithHeader("retry-after", "4"),
                  FakeReply::Events({Bookmark("3")})});
  std::vector<WatchEvent> events;
  ASSERT_TRUE(RunWatch({}, events));
  EXPECT_EQ(events.size(), 1u);
  EXPECT_EQ(sleeps(), std::vector<milliseconds>{milliseconds(4000)});
}

TEST_F(RestClientWatchTest, StopsWhenTheCallerSaysSo) {
  server_.Script("GET", kSecretsPath,
                 {FakeReply::Events({Event("ADDED", Secret("a")), Event("ADDED", Secret("b")),
                                     Event("ADDED", Secret("c"))})});
  std::vector<WatchEvent> events;
  ASSERT_TRUE(RunWatch({}, events, /*stop_after=*/2));
  EXPECT_EQ(events.size(), 2u);
}

TEST_F(RestClientWatchTest, CancellationEndsTheWatchCleanly) {
  server_.Script("GET", kSecretsPath,
                 {FakeReply::Events({Event("ADDED", Secret("a")), Event("ADDED", Secret("b"))})});
  auto client = NewClient();
  bool cancel = false;
  std::vector<WatchEvent> events;
  auto watched = client->Watch(
      kSecrets, "infra", {},
      [&](const WatchEvent& event) {
        events.push_back(event);
        cancel = true;
        return true;
      },
      [&] { return cancel; });
  EXPECT_TRUE(watched);
  EXPECT_EQ(events.size(), 1u);

  auto before_start = client->Watch(
      kSecrets, "infra", {}, [](const WatchEvent&) { return true; }, [] { return true; });
  EXPECT_TRUE(before_start);
  EXPECT_EQ(server_.requests().size(), 1u);
}

TEST_F(RestClientWatchTest, MalformedEventIsAnError) {
  FakeReply reply = FakeReply::Events({Event("ADDED", Secret("a"))});
  reply.chunks.push_back("{\"type\":\"ADDED\",\"object\":\n");
  server_.Script("GET", kSecretsPath, {reply});
  std::vector<WatchEvent> events;
  auto watched = RunWatch({}, events);
  ASSERT_FALSE(watched);
  EXPECT_EQ(watched.error().code(), ErrorCode::kBadResponse);
  EXPECT_EQ(events.size(), 1u);
}

TEST_F(RestClientWatchTest, StreamEndingMidEventIsUnavailable) {
  FakeReply reply = FakeReply::Events({Event("ADDED", Secret("a"))});
  reply.chunks.push_back("{\"type\":\"ADDED\",\"obj");
  server_.Script("GET", kSecretsPath, {reply});
  std::vector<WatchEvent> events;
  auto watched = RunWatch({}, events);
  ASSERT_FALSE(watched);
  EXPECT_EQ(watched.error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(events.size(), 1u);
}

TEST_F(RestClientWatchTest, LastEventWithoutNewlineIsStillDelivered) {
  FakeReply reply;
  reply.chunks = {Event("ADDED", Secret("a")).dump() + "\n", Bookmark("5").dump()};
  server_.Script("GET", kSecretsPath, {reply});
  std::vector<WatchEvent> events;
  ASSERT_TRUE(RunWatch({}, events));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].type, WatchEventType::kBookmark);
}

TEST_F(RestClientWatchTest, TransportFailureIsUnavailable) {
  server_.Script("GET", kSecretsPath, {FakeReply::Failure("Connection refused")});
  std::vector<WatchEvent> events;
  auto watched = RunWatch({}, events);
  ASSERT_FALSE(watched);
  EXPECT_EQ(watched.error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(watched.error().message(), "watch secrets in namespace infra: Connection refused");
}

}  // namespace
}  // namespace rest_client_test
}  // namespace certctl::kube
