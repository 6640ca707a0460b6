// The server's HTTP over bare sockets: methods, statuses, HEAD, keep-alive, pipelining.

#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/endpoints/server.h"

#include "unit/endpoints/raw_client.h"

namespace certctl::endpoints {
namespace protocol_test {
namespace {

using testing::BodyOf;
using testing::Get;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::RawClient;
using testing::StatusOf;

std::unique_ptr<Server> StartServer() {
  Routes routes;
  routes["/healthz"] = [](const Query&) { return Response{200, "ok\n"}; };
  routes["/metrics"] = [](const Query&) {
    return Response{200, "certctl_ready 1\n", "text/plain; version=0.0.4; charset=utf-8"};
  };
  auto server = Server::Start({"127.0.0.1", 0}, std::move(routes));
  EXPECT_TRUE(server) << server.error().message();
  return server ? std::move(*server) : nullptr;
}

TEST(Protocol, ResponsesCarryLengthAndType) {
  auto server = StartServer();
  RawClient client(server->port());
  ASSERT_TRUE(client.Send(Get("/metrics")));
  const std::string response = client.ReadResponse();
  EXPECT_EQ(StatusOf(response), 200);
  EXPECT_THAT(response, HasSubstr("\r\nContent-Length: 16\r\n"));
  EXPECT_THAT(response,
              HasSubstr("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
  EXPECT_EQ(BodyOf(response), "certctl_ready 1\n");
}

TEST(Protocol, OtherMethodsAre405WithAllowWithOrWithoutABody) {
  auto server = StartServer();
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("DELETE /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
  const std::string bare = client.ReadResponse();
  EXPECT_EQ(StatusOf(bare), 405);
  EXPECT_THAT(bare, HasSubstr("\r\nAllow: GET, HEAD\r\n"));
  // Without a body the connection stays usable.
  ASSERT_TRUE(client.Send(Get("/healthz")));
  EXPECT_EQ(StatusOf(client.ReadResponse()), 200);
  // With one, still 405 (not 413), and the unread body ends the connection.
  ASSERT_TRUE(client.Send("POST /nowhere HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nbody"));
  const std::string with_body = client.ReadResponse();
  EXPECT_EQ(StatusOf(with_body), 405);
  EXPECT_THAT(with_body, HasSubstr("\r\nAllow: GET, HEAD\r\n"));
  EXPECT_THAT(with_body, HasSubstr("\r\nConnection: close\r\n"));
  EXPECT_TRUE(client.WaitClosed());
}

TEST(Protocol, AGetWithABodyIs413) {
  auto server = StartServer();
  RawClient client(server->port());
  ASSERT_TRUE(client.Send(Get("/healthz", "Content-Length: 3\r\n") + "abc"));
  EXPECT_EQ(StatusOf(client.ReadResponse()), 413);
  EXPECT_TRUE(client.WaitClosed());
}

TEST(Protocol, UnknownPathsAre404) {
  auto server = StartServer();
  RawClient client(server->port());
  ASSERT_TRUE(client.Send(Get("/nope")));
  EXPECT_EQ(StatusOf(client.ReadResponse()), 404);
}

TEST(Protocol, MalformedRequestsAre400AndClose) {
  auto server = StartServer();
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET /healthz\r\n\r\n"));
  EXPECT_EQ(StatusOf(client.ReadResponse()), 400);
  EXPECT_TRUE(client.WaitClosed());
}

TEST(Protocol, AnOversizedHeadIs431) {
  auto server = StartServer();
  RawClient client(server->port());
  ASSERT_TRUE(
      client.Send("GET /healthz HTTP/1.1\r\nHost: t\r\nX-Filler: " + std::string(16 * 1024, 'a')));
  EXPECT_EQ(StatusOf(client.ReadResponse()), 431);
  EXPECT_TRUE(client.WaitClosed());
}

TEST(Protocol, HeadAnswersTheHeadersWithoutTheBody) {
  auto server = StartServer();
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("HEAD /metrics HTTP/1.1\r\nHost: t\r\n\r\n" + Get("/healthz")));
  const std::string head = client.ReadResponse(/*head_only=*/true);
  EXPECT_EQ(StatusOf(head), 200);
  EXPECT_THAT(head, HasSubstr("\r\nContent-Length: 16\r\n"));
  EXPECT_EQ(BodyOf(head), "");
  // The next response follows at once: no body was sent in between.
  EXPECT_EQ(BodyOf(client.ReadResponse()), "ok\n");
}

TEST(Protocol, KeepsTheConnectionAliveUntilAskedToClose) {
  auto server = StartServer();
  RawClient client(server->port());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client.Send(Get("/healthz")));
    const std::string response = client.ReadResponse();
    EXPECT_EQ(StatusOf(response), 200);
    EXPECT_THAT(response, Not(HasSubstr("Connection: close")));
  }
  ASSERT_TRUE(client.Send(Get("/healthz", "Connection: close\r\n")));
  EXPECT_THAT(client.ReadResponse(), HasSubstr("\r\nConnection: close\r\n"));
  EXPECT_TRUE(client.WaitClosed());
}

TEST(Protocol, Http10ClosesUnlessKeptAlive) {
  auto server = StartServer();
  RawClient kept(server->port());
  ASSERT_TRUE(kept.Send("GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
  EXPECT_THAT(kept.ReadResponse(), HasSubstr("\r\nConnection: keep-alive\r\n"));
  ASSERT_TRUE(kept.Send("GET /healthz HTTP/1.0\r\n\r\n"));
  EXPECT_EQ(StatusOf(kept.ReadResponse()), 200);
  EXPECT_TRUE(kept.WaitClosed());
}

TEST(Protocol, PipelinedRequestsAreAnsweredInOrder) {
  auto server = StartServer();
  RawClient client(server->port());
  std::string burst;
  for (int i = 0; i < 50; ++i) {
    burst += Get(i % 2 == 0 ? "/healthz" : "/metrics");
  }
  burst += "GET /nope HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
  ASSERT_TRUE(client.Send(burst));
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(BodyOf(client.ReadResponse()), i % 2 == 0 ? "ok\n" : "certctl_ready 1\n") << i;
  }
  EXPECT_EQ(StatusOf(client.ReadResponse()), 404);
  EXPECT_TRUE(client.WaitClosed());
}

TEST(Protocol, AClientThatStopsSendingStillGetsItsAnswers) {
  auto server = StartServer();
  RawClient client(server->port());
  ASSERT_TRUE(client.Send(Get("/healthz") + Get("/healthz")));
  client.ShutdownWrite();
  EXPECT_EQ(StatusOf(client.ReadResponse()), 200);
  EXPECT_EQ(StatusOf(client.ReadResponse()), 200);
  EXPECT_TRUE(client.WaitClosed());
}

}  // namespace
}  // namespace protocol_test
}  // namespace certctl::endpoints
