#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "certctl/kube/transport.h"

#include "support/tls_server.h"

namespace certctl::kube {
namespace curl_transport_test {
namespace {

using certctl::testing::TlsServer;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

// A watch to a server that never answers: the stream sits in curl's poll until told to stop.
struct SilentStream {
  TlsServer server{TlsServer::Mode::kSilent};
  std::unique_ptr<HttpTransport> transport;
  std::atomic<bool> cancelled{false};
  std::future<Result<HttpResponse>> ended;

  SilentStream() {
    auto made = MakeCurlTransport(TlsOptions{});
    EXPECT_TRUE(made.has_value()) << made.error().message();
    transport = std::move(*made);
    ended = std::async(std::launch::async, [this] {
      HttpRequest request;
      request.method = "GET";
      request.url = "http://127.0.0.1:" + std::to_string(server.port()) + "/api/v1/secrets";
      request.timeout = milliseconds(0);
      return transport->Stream(
          request, [](std::string_view) { return true; }, [this] { return cancelled.load(); });
    });
    // The connection is accepted: the stream is waiting for an answer that never comes.
    while (server.accepted() == 0) {
      std::this_thread::sleep_for(milliseconds(5));
    }
  }
};

TEST(CurlTransportTest, WakeStreamsEndsAQuietStreamAtOnce) {
  SilentStream stream;
  const auto cancelled_at = steady_clock::now();
  stream.cancelled = true;
  stream.transport->WakeStreams();
  const auto result = stream.ended.get();
  const auto took = steady_clock::now() - cancelled_at;
  ASSERT_TRUE(result.has_value()) << result.error().message();
  EXPECT_TRUE(result->body.empty());
  // Without the wake-up the stream would look again only after its one-second poll.
  EXPECT_LT(took, milliseconds(900));
}

TEST(CurlTransportTest, AQuietStreamNotWokenStillSeesItsCancellation) {
  SilentStream stream;
  stream.cancelled = true;
  ASSERT_EQ(stream.ended.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(stream.ended.get().has_value());
}

TEST(CurlTransportTest, WakeStreamsWithNoStreamInProgressDoesNothing) {
  auto made = MakeCurlTransport(TlsOptions{});
  ASSERT_TRUE(made.has_value()) << made.error().message();
  (*made)->WakeStreams();
}

}  // namespace
}  // namespace curl_transport_test
}  // namespace certctl::kube
