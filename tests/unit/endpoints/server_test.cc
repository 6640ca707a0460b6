#include "certctl/endpoints/server.h"

#include <atomic>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

namespace certctl::endpoints {
namespace server_test {
namespace {

using ::testing::HasSubstr;

TEST(ListenAddress, ParsesTheFormsUsersWrite) {
  const auto any = ParseListenAddress(":8081").value();
  EXPECT_EQ(any.host, "");
  EXPECT_EQ(any.port, 8081);
  const auto loopback = ParseListenAddress("127.0.0.1:0").value();
  EXPECT_EQ(loopback.host, "127.0.0.1");
  EXPECT_EQ(loopback.port, 0);
  EXPECT_EQ(ParseListenAddress("[::1]:9443").value().host, "::1");
  EXPECT_EQ(ParseListenAddress("localhost:80").value().host, "localhost");
}

TEST(ListenAddress, BadAddressesAreNamed) {
  for (const char* text : {"8081", ":", ":http", ":65536", ":-1", "::1:8081", ":80x"}) {
    const auto parsed = ParseListenAddress(text);
    ASSERT_FALSE(parsed) << text;
    EXPECT_EQ(parsed.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(parsed.error().message(), HasSubstr(std::string("\"") + text + "\""));
  }
}

TEST(Server, ServesRoutesAndRefusesTheRest) {
  std::atomic<bool> ready{false};
  Routes routes;
  routes["/readyz"] = [&](const Query&) {
    return ready ? Response{200, "ok\n"} : Response{503, "waiting for the Secret\n"};
  };
  routes["/metrics"] = [](const Query&) {
    return Response{200, "certctl_ready 0\n", "text/plain; version=0.0.4; charset=utf-8"};
  };
  auto server = Server::Start({"127.0.0.1", 0}, std::move(routes));
  ASSERT_TRUE(server) << server.error().message();
  ASSERT_GT((*server)->port(), 0);

  httplib::Client client("127.0.0.1", (*server)->port());
  auto not_ready = client.Get("/readyz");
  ASSERT_TRUE(not_ready);
  EXPECT_EQ(not_ready->status, 503);
  EXPECT_EQ(not_ready->body, "waiting for the Secret\n");
  ready = true;
  EXPECT_EQ(client.Get("/readyz")->status, 200);
  auto metrics = client.Get("/metrics");
  EXPECT_EQ(metrics->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(client.Get("/nope")->status, 404);
  EXPECT_EQ(client.Post("/readyz")->status, 405);
  EXPECT_EQ(client.Get("/readyz?exclude=serving")->status, 200);
  // A body does not turn the refusal of the method into a refusal of the body.
  EXPECT_EQ(client.Post("/readyz", "body", "text/plain")->status, 405);
  (*server)->Stop();
  (*server)->Stop();  // idempotent
  EXPECT_FALSE(client.Get("/readyz"));
}

TEST(Server, HandlersSeeTheQuery) {
  Routes routes;
  routes["/readyz"] = [](const Query& query) {
    std::string seen;
    for (const auto& [name, value] : query) {
      seen += name + "=" + value + ";";
    }
    return Response{200, seen};
  };
  auto server = Server::Start({"127.0.0.1", 0}, std::move(routes));
  ASSERT_TRUE(server) << server.error().message();
  httplib::Client client("127.0.0.1", (*server)->port());
  EXPECT_EQ(client.Get("/readyz?exclude=serving&exclude=certificate&verbose")->body,
            "exclude=serving;exclude=certificate;verbose=;");
  EXPECT_EQ(client.Get("/readyz")->body, "");
}

TEST(Server, APortInUseIsAnErrorNamingTheAddress) {
  auto first = Server::Start({"127.0.0.1", 0}, {});
  ASSERT_TRUE(first);
  auto second = Server::Start({"127.0.0.1", (*first)->port()}, {});
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(second.error().message(),
              HasSubstr("cannot listen on 127.0.0.1:" + std::to_string((*first)->port())));
}

}  // namespace
}  // namespace server_test
}  // namespace certctl::endpoints
