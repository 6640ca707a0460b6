#include "endpoints/event_loop.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "endpoints/dispatch.h"
#include "endpoints/http_request.h"
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace certctl::endpoints {
namespace {

constexpr std::uint64_t kListenId = 0;
constexpr std::uint64_t kWakeId = 1;
constexpr std::uint64_t kFirstConnectionId = 2;
constexpr int kEventsPerWait = 64;
constexpr int kAcceptsPerWake = 64;  // then the other sockets get their turn
// Responses queued beyond this stop the reading of pipelined requests until they drain.
constexpr std::size_t kOutputHighWater = 64 * 1024;
// What a closing connection may still send us (an unread body) before it is cut.
constexpr std::size_t kMaxDrained = 64 * 1024;
// How long accepting pauses when the kernel refuses for lack of memory.
constexpr std::chrono::milliseconds kAcceptPause{100};

std::string PeerOf(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    return {reinterpret_cast<const char*>(&v4.sin_addr), sizeof(v4.sin_addr)};
  }
  if (address.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
    return {reinterpret_cast<const char*>(&v6.sin6_addr), sizeof(v6.sin6_addr)};
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<EventLoop>> EventLoop::Create(int listen_socket, Routes routes,
                                                     const ServerLimits& limits) {
  std::unique_ptr<EventLoop> loop(new EventLoop(listen_socket, std::move(routes), limits));
  loop->epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  loop->wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (loop->epoll_ < 0 || loop->wake_ < 0) {
    return Fail(ErrorCode::kUnavailable,
                std::string("cannot create the server's event loop: ") + std::strerror(errno));
  }
  loop->reserve_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  epoll_event listen_event{};
  listen_event.events = EPOLLIN;
  listen_event.data.u64 = kListenId;
  epoll_event wake_event{};
  wake_event.events = EPOLLIN;
  wake_event.data.u64 = kWakeId;
  if (::epoll_ctl(loop->epoll_, EPOLL_CTL_ADD, listen_socket, &listen_event) != 0 ||
      ::epoll_ctl(loop->epoll_, EPOLL_CTL_ADD, loop->wake_, &wake_event) != 0) {
    return Fail(ErrorCode::kUnavailable,
                std::string("cannot create the server's event loop: ") + std::strerror(errno));
  }
  return loop;
}

EventLoop::EventLoop(int listen_socket, Routes routes, const ServerLimits& limits)
    : listen_socket_(listen_socket),
      routes_(std::move(routes)),
      limits_(limits),
      next_id_(kFirstConnectionId) {
  limits_.connections = std::max<std::size_t>(limits_.connections, 1);
  limits_.connections_per_peer = std::max<std::size_t>(limits_.connections_per_peer, 1);
}

EventLoop::~EventLoop() {
  for (auto& [id, connection] : connections_) {
    ::close(connection.socket);
  }
  for (const int descriptor : {listen_socket_, epoll_, wake_, reserve_}) {
    if (descriptor >= 0) {
      ::close(descriptor);
    }
  }
}

void EventLoop::Wake() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto written = ::write(wake_, &one, sizeof(one));
}

void EventLoop::Run() {
  std::array<epoll_event, kEventsPerWait> events{};
  while (true) {
    const int ready = ::epoll_wait(epoll_, events.data(), kEventsPerWait,
                                   MillisecondsToNextDeadline(Clock::now()));
    const auto now = Clock::now();
    for (int i = 0; i < ready; ++i) {
      const std::uint64_t id = events[i].data.u64;
      if (id == kWakeId) {
        return;
      }
      if (id == kListenId) {
        AcceptReady(now);
      } else {
        OnEvent(id, events[i].events, now);
      }
    }
    ExpireDeadlines(now);
  }
}

void EventLoop::AcceptReady(Clock::time_point now) {
  for (int i = 0; i < kAcceptsPerWake && AcceptOne(now); ++i) {
  }
}

// False when there is nothing more to accept for now.
bool EventLoop::AcceptOne(Clock::time_point now) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  const int socket = ::accept4(listen_socket_, reinterpret_cast<sockaddr*>(&address), &length,
                               SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (socket >= 0) {
    Admit(socket, PeerOf(address), now);
    return true;
  }
  switch (errno) {
    case EINTR:
    case ECONNABORTED:
    case EPROTO:
      return true;
    case EMFILE:
    case ENFILE:
      // Out of descriptors: a silent connection, else the oldest, makes room for the new
      // one (a probe must get its turn); with none to close, the spare descriptor lets the
      // pending connection be accepted and shut so that the loop does not spin on it.
      if (!connections_.empty()) {
        EvictOneOf(AllConnections(), 0);  // 0: no connection has that id
        return true;
      }
      if (reserve_ >= 0) {
        ::close(reserve_);
        const int shed = ::accept4(listen_socket_, nullptr, nullptr, SOCK_CLOEXEC);
        if (shed >= 0) {
          ::close(shed);
        }
        reserve_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (shed >= 0) {
          return true;
        }
      }
      PauseAccepting(now);
      return false;
    case EAGAIN:
      return false;
    default:  // ENOBUFS, ENOMEM: try again a little later rather than spin
      PauseAccepting(now);
      return false;
  }
}

void EventLoop::PauseAccepting(Clock::time_point now) {
  epoll_event event{};
  event.data.u64 = kListenId;
  ::epoll_ctl(epoll_, EPOLL_CTL_MOD, listen_socket_, &event);
  accept_paused_until_ = now + kAcceptPause;
}

void EventLoop::Admit(int socket, std::string peer, Clock::time_point now) {
  const int yes = 1;
  ::setsockopt(socket, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
  const std::uint64_t id = next_id_++;
  Connection& connection = connections_[id];
  connection.socket = socket;
  connection.peer = peer;
  connection.deadline = now + limits_.request_deadline;
  by_peer_[connection.peer].insert(id);
  connection.interest = EPOLLIN;
  epoll_event event{};
  event.events = connection.interest;
  event.data.u64 = id;
  if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, socket, &event) != 0) {
    Close(id);
    return;
  }
  // What it sent already is read (and answered) before anything is evicted: a probe's
  // request is usually there by the time it is accepted, and a connection that has spoken
  // is the last to go.
  OnEvent(id, EPOLLIN, now);
  const auto peer_ids = by_peer_.find(peer);
  if (peer_ids != by_peer_.end() && peer_ids->second.size() > limits_.connections_per_peer) {
    // Each silent connection of this peer gets a read first: one that has sent its request
    // since it was accepted is answered, not evicted in the same accept batch.
    for (const std::uint64_t other : PeerConnections(peer)) {
      const auto found = connections_.find(other);
      if (found != connections_.end() && !found->second.spoke) {
        OnEvent(other, EPOLLIN, now);
      }
    }
    if (const auto ids = PeerConnections(peer); ids.size() > limits_.connections_per_peer) {
      EvictOneOf(ids, id);
    }
  }
  if (connections_.size() > limits_.connections) {
    EvictOneOf(AllConnections(), id);
  }
}

std::vector<std::uint64_t> EventLoop::AllConnections() const {
  std::vector<std::uint64_t> all;
  all.reserve(connections_.size());
  for (const auto& [id, connection] : connections_) {
    all.push_back(id);
  }
  return all;
}

std::vector<std::uint64_t> EventLoop::PeerConnections(const std::string& peer) const {
  const auto found = by_peer_.find(peer);
  return found == by_peer_.end()
             ? std::vector<std::uint64_t>()
             : std::vector<std::uint64_t>(found->second.begin(), found->second.end());
}

// At a cap: the oldest connection that has sent nothing goes, else the oldest (`ids` oldest
// first), never `admitted`, the one that reached the cap. A fresh probe always gets its turn,
// and whoever holds connections open loses its own silent ones first, then its oldest.
void EventLoop::EvictOneOf(const std::vector<std::uint64_t>& ids, std::uint64_t admitted) {
  std::optional<std::uint64_t> oldest;
  for (const std::uint64_t id : ids) {
    const auto found = connections_.find(id);
    if (id == admitted || found == connections_.end()) {
      continue;
    }
    if (!found->second.spoke) {
      Close(id);
      return;
    }
    oldest = oldest.value_or(id);
  }
  if (oldest) {
    Close(*oldest);
  }
}

void EventLoop::OnEvent(std::uint64_t id, std::uint32_t events, Clock::time_point now) {
  const auto found = connections_.find(id);
  if (found == connections_.end()) {
    return;  // closed earlier in this round
  }
  Connection& connection = found->second;
  if ((events & EPOLLERR) != 0) {
    Close(id);
    return;
  }
  bool open = true;
  if ((events & (EPOLLIN | EPOLLHUP)) != 0) {
    open = connection.draining ? Drain(connection) : ReadAvailable(connection);
  }
  if (open && !connection.draining) {
    open = Progress(connection, now);
  }
  if (!open) {
    Close(id);
    return;
  }
  Watch(id, connection);
}

// False when the connection is to be closed.
bool EventLoop::ReadAvailable(Connection& connection) {
  while (!connection.peer_done && connection.in.size() < kMaxRequestHead) {
    std::array<char, 4096> chunk{};
    const std::size_t room = std::min(chunk.size(), kMaxRequestHead - connection.in.size());
    const auto got = ::recv(connection.socket, chunk.data(), room, 0);
    if (got > 0) {
      connection.in.append(chunk.data(), static_cast<std::size_t>(got));
      connection.spoke = true;
    } else if (got == 0) {
      connection.peer_done = true;
    } else {
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    }
  }
  return true;
}

bool EventLoop::Drain(Connection& connection) {
  std::array<char, 4096> chunk{};
  while (true) {
    const auto got = ::recv(connection.socket, chunk.data(), chunk.size(), 0);
    if (got > 0) {
      connection.drained += static_cast<std::size_t>(got);
      if (connection.drained > kMaxDrained) {
        return false;
      }
    } else {
      return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
    }
  }
}

// Answers the complete requests buffered, writes what it can; false to close.
bool EventLoop::Progress(Connection& connection, Clock::time_point now) {
  bool more = true;  // requests may be waiting behind a full output buffer
  while (more) {
    const bool was_writing = connection.sent < connection.out.size();
    more = false;
    while (!connection.close_after_write) {
      if (connection.out.size() - connection.sent >= kOutputHighWater) {
        more = true;
        break;
      }
      const ParseOutcome parsed = ParseRequestHead(connection.in);
      if (parsed.state == ParseState::kIncomplete) {
        break;
      }
      Reply reply = parsed.state == ParseState::kComplete ? Dispatch(parsed.head, routes_)
                                                          : Refuse(parsed.state);
      connection.in.erase(0, parsed.consumed);
      connection.out += reply.bytes;
      connection.close_after_write = reply.close;
    }
    if (connection.sent < connection.out.size()) {
      if (!was_writing) {
        connection.deadline = now + limits_.response_deadline;
      }
      if (!Flush(connection)) {
        return false;
      }
      if (connection.sent < connection.out.size()) {
        return true;  // the rest when the socket is writable
      }
    }
    if (connection.sent > 0) {
      // A response went out: the next request's time starts now.
      connection.out.clear();
      connection.sent = 0;
      connection.deadline = now + limits_.request_deadline;
    }
  }
  if (connection.close_after_write) {
    // Shut the write side and read what the client still sends before closing: closing
    // with unread bytes would reset the connection and could destroy the response.
    ::shutdown(connection.socket, SHUT_WR);
    connection.draining = true;
    connection.in.clear();
  }
  // A client that has stopped sending gets no more answers once its requests are done.
  return !connection.peer_done;
}

bool EventLoop::Flush(Connection& connection) {
  while (connection.sent < connection.out.size()) {
    const auto written = ::send(connection.socket, connection.out.data() + connection.sent,
                                connection.out.size() - connection.sent, MSG_NOSIGNAL);
    if (written >= 0) {
      connection.sent += static_cast<std::size_t>(written);
    } else {
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    }
  }
  return true;
}

void EventLoop::Watch(std::uint64_t id, Connection& connection) {
  const bool writing = connection.sent < connection.out.size();
  const bool reading =
      connection.draining || (!connection.peer_done && !connection.close_after_write && !writing &&
                              connection.in.size() < kMaxRequestHead);
  const std::uint32_t interest = (reading ? EPOLLIN : 0U) | (writing ? EPOLLOUT : 0U);
  if (interest == connection.interest) {
    return;
  }
  connection.interest = interest;
  epoll_event event{};
  event.events = interest;
  event.data.u64 = id;
  if (::epoll_ctl(epoll_, EPOLL_CTL_MOD, connection.socket, &event) != 0) {
    Close(id);
  }
}

void EventLoop::Close(std::uint64_t id) {
  const auto found = connections_.find(id);
  if (found == connections_.end()) {
    return;
  }
  const auto peer = by_peer_.find(found->second.peer);
  if (peer != by_peer_.end()) {
    peer->second.erase(id);
    if (peer->second.empty()) {
      by_peer_.erase(peer);
    }
  }
  ::close(found->second.socket);  // also leaves the epoll set
  connections_.erase(found);
}

void EventLoop::ExpireDeadlines(Clock::time_point now) {
  if (accept_paused_until_ && *accept_paused_until_ <= now) {
    accept_paused_until_.reset();
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = kListenId;
    ::epoll_ctl(epoll_, EPOLL_CTL_MOD, listen_socket_, &event);
  }
  for (auto it = connections_.begin(); it != connections_.end();) {
    const auto next = std::next(it);
    if (it->second.deadline <= now) {
      Close(it->first);
    }
    it = next;
  }
}

int EventLoop::MillisecondsToNextDeadline(Clock::time_point now) const {
  std::optional<Clock::time_point> next = accept_paused_until_;
  for (const auto& [id, connection] : connections_) {
    if (!next || connection.deadline < *next) {
      next = connection.deadline;
    }
  }
  if (!next) {
    return -1;
  }
  if (*next <= now) {
    return 0;
  }
  // Rounded up: waking a little early would only find nothing due.
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(*next - now);
  return static_cast<int>(std::min<std::chrono::milliseconds::rep>(wait.count(), 60'000));
}

}  // namespace certctl::endpoints
