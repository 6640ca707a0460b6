#include "certctl/endpoints/server.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include <httplib.h>

#include <sys/socket.h>

namespace certctl::endpoints {
namespace {

// Probes and scrapes come one or two at a time; a few threads serve them all.
constexpr std::size_t kServingThreads = 2;
constexpr std::chrono::seconds kIoTimeout{5};

}  // namespace

Result<ListenAddress> ParseListenAddress(std::string_view text) {
  return ParseHostPort(text, "listen address");
}

struct Server::State {
  httplib::Server http;
  std::thread serving;
  std::atomic<bool> served{false};  // listen_after_bind returned
  int port = 0;
};

Server::Server(std::unique_ptr<State> state) : state_(std::move(state)) {}

Server::~Server() { Stop(); }

int Server::port() const { return state_->port; }

void Server::Stop() {
  if (state_->serving.joinable()) {
    state_->http.stop();
    state_->serving.join();
  }
}

Result<std::unique_ptr<Server>> Server::Start(const ListenAddress& address, Routes routes) {
  auto state = std::make_unique<State>();
  httplib::Server& http = state->http;
  http.new_task_queue = [] { return new httplib::ThreadPool(kServingThreads); };
  http.set_read_timeout(kIoTimeout);
  http.set_write_timeout(kIoTimeout);
  http.set_payload_max_length(0);
  // SO_REUSEADDR so a restart binds at once; not SO_REUSEPORT (the library's default), which
  // would let a second process share the port and answer half the probes.
  http.set_socket_options([](int socket) {
    const int yes = 1;
    ::setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  for (auto& [path, handler] : routes) {
    http.Get(path, [handler = std::move(handler)](const httplib::Request& request,
                                                  httplib::Response& response) {
      const Query query(request.params.begin(), request.params.end());
      Response answer = handler(query);
      response.status = answer.status;
      response.set_content(std::move(answer.body), answer.content_type);
    });
  }
  const auto refuse = [](const httplib::Request&, httplib::Response& response) {
    response.status = 405;
    response.set_content("method not allowed\n", "text/plain; charset=utf-8");
  };
  http.Post(".*", refuse);
  http.Put(".*", refuse);
  http.Patch(".*", refuse);
  http.Delete(".*", refuse);

  const std::string host = address.host.empty() ? "0.0.0.0" : address.host;
  errno = 0;
  if (address.port == 0) {
    state->port = http.bind_to_any_port(host);
  } else if (http.bind_to_port(host, address.port)) {
    state->port = address.port;
  }
  if (state->port <= 0) {
    const int error_number = errno;
    return Fail(ErrorCode::kUnavailable,
                "cannot listen on " + FormatHostPort(address) +
                    (error_number != 0 ? ": " + std::string(std::strerror(error_number)) : ""));
  }
  State* serving = state.get();
  state->serving = std::thread([serving] {
    serving->http.listen_after_bind();
    serving->served = true;
  });
  // stop() is a no-op until the accept loop runs, so a Stop right after Start would wait
  // forever: return only once it runs (or has already ended).
  while (!state->http.is_running() && !state->served) {
    std::this_thread::yield();
  }
  return std::unique_ptr<Server>(new Server(std::move(state)));
}

}  // namespace certctl::endpoints
