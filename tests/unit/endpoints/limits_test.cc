// What clients that hold connections cannot take from a probe: the request deadline, the
// per-peer and global caps (the oldest connection goes), Stop with connections open.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/endpoints/server.h"

#include "unit/endpoints/raw_client.h"

namespace certctl::endpoints {
namespace limits_test {
namespace {

using namespace std::chrono_literals;
using testing::Get;
using testing::RawClient;
using testing::StatusOf;

std::unique_ptr<Server> StartServer(const ServerLimits& limits) {
  Routes routes;
  routes["/healthz"] = [](const Query&) { return Response{200, "ok\n"}; };
  auto server = Server::Start({"127.0.0.1", 0}, std::move(routes), limits);
  EXPECT_TRUE(server) << server.error().message();
  return server ? std::move(*server) : nullptr;
}

// Limits where only the cap under test can close a connection during the test.
ServerLimits Patient() {
  ServerLimits limits;
  limits.request_deadline = 60s;
  return limits;
}

bool Probe(int port, const char* source) {
  RawClient client(port, source);
  return client.connected() && client.Send(Get("/healthz", "Connection: close\r\n")) &&
         StatusOf(client.ReadResponse()) == 200;
}

TEST(Limits, AHeadNotCompleteByTheDeadlineIsClosed) {
  ServerLimits limits;
  limits.request_deadline = 200ms;
  auto server = StartServer(limits);
  RawClient slow(server->port());
  ASSERT_TRUE(slow.Send("GET /healthz HTTP/1.1\r\n"));
  // One header line at a time, while the server lets it: the deadline is for the whole
  // head, so however steadily it trickles, the connection ends.
  bool closed = false;
  for (int line = 0; line < 100 && !closed; ++line) {
    closed = slow.WaitClosedFor(50ms) || !slow.Send("X-Line: " + std::to_string(line) + "\r\n");
  }
  EXPECT_TRUE(closed || slow.WaitClosed());
  EXPECT_TRUE(Probe(server->port(), "127.0.0.1"));
}

TEST(Limits, AnIdleKeptAliveConnectionIsClosedAtTheDeadline) {
  ServerLimits limits;
  limits.request_deadline = 200ms;
  auto server = StartServer(limits);
  RawClient idle(server->port());
  ASSERT_TRUE(idle.Send(Get("/healthz")));
  EXPECT_EQ(StatusOf(idle.ReadResponse()), 200);
  EXPECT_TRUE(idle.WaitClosed());
}

TEST(Limits, APeerAtItsCapLosesItsOldestConnection) {
  ServerLimits limits = Patient();
  limits.connections_per_peer = 4;
  auto server = StartServer(limits);
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<RawClient>(server->port(), "127.0.0.1"));
  }
  // Another address does not count against 127.0.0.1.
  RawClient other(server->port(), "127.0.0.2");
  ASSERT_TRUE(other.Send(Get("/healthz")));
  EXPECT_EQ(StatusOf(other.ReadResponse()), 200);
  RawClient fifth(server->port(), "127.0.0.1");
  ASSERT_TRUE(fifth.Send(Get("/healthz")));
  EXPECT_EQ(StatusOf(fifth.ReadResponse()), 200);
  EXPECT_TRUE(held[0]->WaitClosed());
  for (int i = 1; i < 4; ++i) {
    ASSERT_TRUE(held[i]->Send(Get("/healthz"))) << i;
    EXPECT_EQ(StatusOf(held[i]->ReadResponse()), 200) << i;
  }
  ASSERT_TRUE(other.Send(Get("/healthz")));
  EXPECT_EQ(StatusOf(other.ReadResponse()), 200);
}

TEST(Limits, AtTheGlobalCapTheOldestConnectionGoes) {
  ServerLimits limits = Patient();
  limits.connections = 3;
  auto server = StartServer(limits);
  RawClient first(server->port(), "127.0.0.1");
  RawClient second(server->port(), "127.0.0.2");
  RawClient third(server->port(), "127.0.0.3");
  EXPECT_TRUE(Probe(server->port(), "127.0.0.4"));
  EXPECT_TRUE(first.WaitClosed());
  ASSERT_TRUE(third.Send(Get("/healthz")));
  EXPECT_EQ(StatusOf(third.ReadResponse()), 200);
}

TEST(Limits, ProbesAreAnsweredWhileOnePeerHoldsHundredsOfConnections) {
  auto server = StartServer(Patient());
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 300; ++i) {
    idle.push_back(std::make_unique<RawClient>(server->port(), "127.0.0.1"));
    if (i % 3 == 0) {
      ASSERT_TRUE(idle.back()->Send("GET /healthz HTTP/1.1\r\n"));  // and never more
    }
  }
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(Probe(server->port(), "127.0.0.2")) << i;
  }
  EXPECT_TRUE(Probe(server->port(), "127.0.0.1"));
}

TEST(Limits, StopClosesOpenConnectionsAndTheListener) {
  auto server = StartServer(Patient());
  const int port = server->port();
  RawClient idle(port);
  RawClient partial(port);
  ASSERT_TRUE(partial.Send("GET /healthz HTTP/1.1\r\nHost: t\r\n"));
  RawClient kept(port);
  ASSERT_TRUE(kept.Send(Get("/healthz")));
  EXPECT_EQ(StatusOf(kept.ReadResponse()), 200);
  server->Stop();
  EXPECT_TRUE(idle.WaitClosed());
  EXPECT_TRUE(partial.WaitClosed());
  EXPECT_TRUE(kept.WaitClosed());
  server->Stop();
  EXPECT_FALSE(RawClient(port).connected());
}

}  // namespace
}  // namespace limits_test
}  // namespace certctl::endpoints
