#include "certctl/inject/called_names.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/target_objects.h"

namespace certctl::inject {
namespace called_names_test {
namespace {

using certctl::testing::ApiService;
using certctl::testing::ConversionCrd;
using certctl::testing::WebhookConfiguration;
using certctl::testing::WebhookEntry;
using Json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr TargetKind kVwc = TargetKind::kValidatingWebhookConfiguration;

CalledEndpoint One(const Json& client_config) {
  auto endpoints = ReadCalledEndpoints(
      kVwc, WebhookConfiguration(
                "x", {WebhookEntry("a.example.com", "infra").ClientConfig(client_config)}));
  EXPECT_THAT(endpoints, SizeIs(1));
  return endpoints.empty() ? CalledEndpoint{} : endpoints.front();
}

TEST(ReadCalledEndpoints, AServiceIsCalledAsNameNamespaceSvcOnPort443ByDefault) {
  const Json object = WebhookConfiguration(
      "x", {WebhookEntry("a.example.com", "infra").Service("infra", "hook"),
            WebhookEntry("b.example.com", "infra").Service("demo", "h", 8443)});
  auto endpoints = ReadCalledEndpoints(kVwc, object);
  ASSERT_THAT(endpoints, SizeIs(2));
  EXPECT_EQ(endpoints[0].index, 0U);
  EXPECT_EQ(endpoints[0].entry, "a.example.com");
  EXPECT_EQ(endpoints[0].field, "webhooks[0].clientConfig");
  EXPECT_EQ(endpoints[0].host, "hook.infra.svc");
  EXPECT_EQ(endpoints[0].Calls(), "hook.infra.svc");
  ASSERT_TRUE(endpoints[0].service.has_value());
  EXPECT_EQ(endpoints[0].service->port, 443);
  EXPECT_TRUE(endpoints[0].problem.empty());
  EXPECT_EQ(endpoints[1].index, 1U);
  EXPECT_EQ(endpoints[1].host, "h.demo.svc");
  EXPECT_EQ(endpoints[1].service->port, 8443);
}

TEST(ReadCalledEndpoints, AUrlIsCalledByItsHost) {
  EXPECT_EQ(One({{"url", "https://Hook.Example.COM/validate"}}).host, "hook.example.com");
  EXPECT_EQ(One({{"url", "https://hook.example.com:8443"}}).host, "hook.example.com");
  EXPECT_EQ(One({{"url", "https://10.0.0.5:8443/v"}}).host, "10.0.0.5");
  EXPECT_EQ(One({{"url", "https://[fd00::1]:8443/v"}}).host, "fd00::1");
  EXPECT_EQ(One({{"url", "https://[fd00::1]"}}).host, "fd00::1");
  EXPECT_EQ(One({{"url", "HTTPS://hook.example.com/"}}).host, "hook.example.com");
  const CalledEndpoint endpoint = One({{"url", "https://hook.example.com/v"}});
  EXPECT_EQ(endpoint.Calls(), "https://hook.example.com/v");
  EXPECT_FALSE(endpoint.service.has_value());
}

TEST(UrlAddress, ThePortWrittenElse443) {
  const auto address = [](const char* url) {
    auto parsed = UrlAddress(url);
    EXPECT_TRUE(parsed.has_value()) << url;
    return parsed ? parsed->host + " " + std::to_string(parsed->port) : std::string();
  };
  EXPECT_EQ(address("https://Hook.Example.COM/validate"), "hook.example.com 443");
  EXPECT_EQ(address("https://hook.example.com:8443/v"), "hook.example.com 8443");
  EXPECT_EQ(address("https://[fd00::1]:9443"), "fd00::1 9443");
  EXPECT_EQ(address("https://[fd00::1]"), "fd00::1 443");
  EXPECT_EQ(address("https://hook.example.com:/v"), "hook.example.com 443");
  // A bare "#" or "?" is no fragment and no query to the API server, which stores and calls it.
  EXPECT_EQ(address("https://hook.example.com/v#"), "hook.example.com 443");
  EXPECT_EQ(address("https://hook.example.com:8443?"), "hook.example.com 8443");
  EXPECT_FALSE(UrlAddress("http://hook.example.com").has_value());
  EXPECT_FALSE(UrlAddress("https://hook.example.com/v#top").has_value());
  EXPECT_FALSE(UrlAddress("https://hook.example.com/v?a=b").has_value());
  auto beyond = UrlAddress("https://hook.example.com:99999/v");
  ASSERT_FALSE(beyond.has_value());
  EXPECT_NE(beyond.error().message().find("beyond 65535"), std::string::npos);
}

TEST(ReadCalledEndpoints, AMalformedClientConfigIsAProblemNamingTheField) {
  const auto problem = [](const Json& client_config) { return One(client_config).problem; };
  EXPECT_EQ(problem(Json::object()),
            "webhooks[0].clientConfig has neither url nor service, so nothing can be called");
  EXPECT_THAT(problem({{"url", "https://h"}, {"service", {{"namespace", "n"}, {"name", "s"}}}}),
              HasSubstr("webhooks[0].clientConfig has both url and service"));
  EXPECT_EQ(problem({{"url", "http://h.example.com/x"}}),
            "webhooks[0].clientConfig.url \"http://h.example.com/x\" is not https, the only "
            "scheme the API server calls");
  EXPECT_EQ(problem({{"url", "https://user:secret@h.example.com/"}}),
            "webhooks[0].clientConfig.url \"https://REDACTED@h.example.com/\" has user "
            "information, which the API server refuses");
  EXPECT_THAT(problem({{"url", "https://h.example.com/#frag"}}), HasSubstr("has a fragment"));
  EXPECT_THAT(problem({{"url", "https://h.example.com/?q=1"}}), HasSubstr("query parameters"));
  EXPECT_THAT(problem({{"url", "https:///path"}}), HasSubstr("has no host"));
  EXPECT_THAT(problem({{"url", "https://[fd00::1/x"}}), HasSubstr("closing ']'"));
  EXPECT_THAT(problem({{"url", "https://h.example.com:https/"}}), HasSubstr("port"));
  EXPECT_THAT(problem({{"url", 42}}), HasSubstr("webhooks[0].clientConfig.url is not a string"));
  EXPECT_THAT(problem({{"service", {{"namespace", "n"}}}}),
              HasSubstr("webhooks[0].clientConfig.service.name is missing"));
  EXPECT_THAT(problem({{"service", {{"name", "s"}}}}),
              HasSubstr("webhooks[0].clientConfig.service.namespace is missing"));
  EXPECT_EQ(problem({{"service", {{"namespace", "n"}, {"name", "s"}, {"port", 0}}}}),
            "webhooks[0].clientConfig.service.port 0 is not a port (1-65535)");
  EXPECT_THAT(problem({{"service", {{"namespace", "n"}, {"name", "s"}, {"port", 70000}}}}),
              HasSubstr("port 70000 is not a port"));
  EXPECT_THAT(problem({{"service", {{"namespace", "n"}, {"name", "s"}, {"port", "443"}}}}),
              HasSubstr("port is not an integer"));
  // Control characters from the cluster do not reach the one-line message.
  EXPECT_EQ(problem({{"url", "http://h\n"}}).find('\n'), std::string::npos);
}

TEST(ReadCalledEndpoints, OneBadEntryDoesNotHideTheOthers) {
  const Json object = WebhookConfiguration(
      "x", {WebhookEntry("a.example.com", "infra").ClientConfig(Json::object()),
            WebhookEntry("b.example.com", "infra").Service("infra", "hook")});
  auto endpoints = ReadCalledEndpoints(kVwc, object);
  ASSERT_THAT(endpoints, SizeIs(2));
  EXPECT_FALSE(endpoints[0].problem.empty());
  EXPECT_EQ(endpoints[1].host, "hook.infra.svc");
}

TEST(ReadCalledEndpoints, CrdConversionAndApiService) {
  auto crd = ReadCalledEndpoints(
      TargetKind::kCustomResourceDefinition,
      ConversionCrd("widgets.example.com", {{"service", {{"namespace", "n"}, {"name", "conv"}}}}));
  ASSERT_THAT(crd, SizeIs(1));
  EXPECT_EQ(crd[0].field, "spec.conversion.webhook.clientConfig");
  EXPECT_EQ(crd[0].host, "conv.n.svc");

  auto api = ReadCalledEndpoints(
      TargetKind::kApiService,
      ApiService("v1.metrics.example.com", {{"namespace", "n"}, {"name", "m"}, {"port", 6443}}));
  ASSERT_THAT(api, SizeIs(1));
  EXPECT_EQ(api[0].field, "spec");
  EXPECT_EQ(api[0].host, "m.n.svc");
  EXPECT_EQ(api[0].service->port, 6443);
  EXPECT_TRUE(api[0].verified);

  Json skip = ApiService("v1.metrics.example.com", {{"namespace", "n"}, {"name", "m"}});
  skip["spec"]["insecureSkipTLSVerify"] = true;
  EXPECT_FALSE(ReadCalledEndpoints(TargetKind::kApiService, skip)[0].verified);

  Json local = ApiService("v1.metrics.example.com", nullptr);
  EXPECT_THAT(ReadCalledEndpoints(TargetKind::kApiService, local)[0].problem,
              HasSubstr("spec.service is missing"));
}

TEST(ReadCalledEndpoints, ObjectsWithoutSlotsHaveNoEndpoints) {
  EXPECT_TRUE(ReadCalledEndpoints(kVwc, Json::object()).empty());
  EXPECT_TRUE(ReadCalledEndpoints(kVwc, {{"webhooks", "no"}}).empty());
  EXPECT_TRUE(ReadCalledEndpoints(TargetKind::kCustomResourceDefinition, Json::array()).empty());
}

}  // namespace
}  // namespace called_names_test
}  // namespace certctl::inject
