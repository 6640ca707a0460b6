#pragma once

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

// GET handlers by path. They run on the server's threads, so they must be thread-safe and
// quick: they report state, they never wait for a reconcile.
using Routes = std::map<std::string, std::function<Response(const Query& query)>, std::less<>>;

// A small HTTP/1.1 server for health, readiness and metrics. Anything but a GET (or HEAD)
// of a route is answered 404 or 405; request bodies are refused.
class Server {
 public:
  // Binds before returning, so a port in use is an error here (kUnavailable naming the
  // address), then serves on threads of its own.
  static Result<std::unique_ptr<Server>> Start(const ListenAddress& address, Routes routes);

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server();  // stops

  // The port bound (the one picked when 0 was asked for).
  int port() const;
  // Stops accepting and waits for the serving threads; idempotent.
  void Stop();

 private:
  struct State;
  explicit Server(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace certctl::endpoints
