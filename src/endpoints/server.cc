#include "certctl/endpoints/server.h"

#include <cerrno>
#include <cstring>
#include <thread>

#include "endpoints/event_loop.h"
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

namespace certctl::endpoints {
namespace {

// A listening socket on the first of the host's addresses that binds; the error of the last
// one that did not.
Result<int> Listen(const ListenAddress& address) {
  const std::string where = "cannot listen on " + FormatHostPort(address);
  addrinfo hints{};
  hints.ai_family = address.host.empty() ? AF_INET : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(address.port);
  const int lookup = ::getaddrinfo(address.host.empty() ? nullptr : address.host.c_str(),
                                   port.c_str(), &hints, &found);
  if (lookup != 0) {
    return Fail(ErrorCode::kUnavailable, where + ": " + ::gai_strerror(lookup));
  }
  int error_number = 0;
  int bound = -1;
  for (const addrinfo* candidate = found; candidate != nullptr && bound < 0;
       candidate = candidate->ai_next) {
    const int socket =
        ::socket(candidate->ai_family, candidate->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                 candidate->ai_protocol);
    if (socket < 0) {
      error_number = errno;
      continue;
    }
    // SO_REUSEADDR so a restart binds at once; never SO_REUSEPORT, which would let a second
    // process share the port and answer half the probes.
    const int yes = 1;
    ::setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(socket, candidate->ai_addr, candidate->ai_addrlen) == 0 &&
        ::listen(socket, SOMAXCONN) == 0) {
      bound = socket;
    } else {
      error_number = errno;
      ::close(socket);
    }
  }
  ::freeaddrinfo(found);
  if (bound < 0) {
    return Fail(ErrorCode::kUnavailable,
                where + (error_number != 0 ? ": " + std::string(std::strerror(error_number)) : ""));
  }
  return bound;
}

int BoundPort(int socket) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getsockname(socket, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return 0;
  }
  const auto port = address.ss_family == AF_INET6
                        ? reinterpret_cast<const sockaddr_in6&>(address).sin6_port
                        : reinterpret_cast<const sockaddr_in&>(address).sin_port;
  return ntohs(port);
}

}  // namespace

Result<ListenAddress> ParseListenAddress(std::string_view text) {
  return ParseHostPort(text, "listen address");
}

struct Server::State {
  std::unique_ptr<EventLoop> loop;
  std::thread serving;
  int port = 0;
};

Server::Server(std::unique_ptr<State> state) : state_(std::move(state)) {}

Server::~Server() { Stop(); }

int Server::port() const { return state_->port; }

void Server::Stop() {
  if (state_->serving.joinable()) {
    state_->loop->Wake();
    state_->serving.join();
    state_->loop.reset();  // closes the listening socket and every connection
  }
}

Result<std::unique_ptr<Server>> Server::Start(const ListenAddress& address, Routes routes,
                                              const ServerLimits& limits) {
  auto listening = Listen(address);
  if (!listening) {
    return Fail(listening.error());
  }
  auto state = std::make_unique<State>();
  state->port = BoundPort(*listening);
  auto loop = EventLoop::Create(*listening, std::move(routes), limits);
  if (!loop) {
    return Fail(loop.error());
  }
  state->loop = std::move(*loop);
  EventLoop* serving = state->loop.get();
  state->serving = std::thread([serving] { serving->Run(); });
  return std::unique_ptr<Server>(new Server(std::move(state)));
}

}  // namespace certctl::endpoints
