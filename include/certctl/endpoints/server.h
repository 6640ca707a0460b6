#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "certctl/util/host_port.h"
#include "certctl/util/result.h"

namespace certctl::endpoints {

// Where to listen: ":8081" (every IPv4 address), "127.0.0.1:8081", "[::1]:8081"; port 0
// picks a free port.
using ListenAddress = HostPort;

// kInvalidArgument naming the text and what is wrong with it.
Result<ListenAddress> ParseListenAddress(std::string_view text);

// A request's query parameters: "/readyz?exclude=serving&verbose" has exclude=serving and
// verbose="". A parameter may repeat.
using Query = std::multimap<std::string, std::string, std::less<>>;

struct Response {
  int status = 200;
  std::string body;
  std::string content_type = "text/plain; charset=utf-8";
};

// GET handlers by path. They run on the server's one thread, between the reads and writes of
// every connection, so they must be quick and thread-safe: they report state, they never
// wait for a reconcile.
using Routes = std::map<std::string, std::function<Response(const Query& query)>, std::less<>>;

// What one client, or all of them, may hold of the server. The defaults keep probes answered
// while other clients hold connections open, send slowly or never read.
struct ServerLimits {
  // For the whole request head, from accept or from the end of the previous response.
  std::chrono::milliseconds request_deadline{2000};
  // For a response to be read by the client.
  std::chrono::milliseconds response_deadline{5000};
  // Connections open at once from one source address, and in all; at a cap the oldest
  // connection (of that address, or of all) is closed to admit the new one.
  std::size_t connections_per_peer = 32;
  std::size_t connections = 512;
};

// A small HTTP/1.1 server for health, readiness and metrics, on one thread of its own. GET
// and HEAD of a route run its handler; an unknown path is 404, any other method 405 (with
// Allow), a GET with a body 413, a malformed request 400, a head over 8 KiB 431.
// Connections are kept alive (HTTP/1.1) and may pipeline requests.
class Server {
 public:
  // Binds before returning, so a port in use is an error here (kUnavailable naming the
  // address), then serves on a thread of its own.
  static Result<std::unique_ptr<Server>> Start(const ListenAddress& address, Routes routes,
                                               const ServerLimits& limits = {});

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server();  // stops

  // The port bound (the one picked when 0 was asked for).
  int port() const;
  // Stops serving, closes every connection and the listening socket; prompt and idempotent.
  void Stop();

 private:
  struct State;
  explicit Server(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace certctl::endpoints
