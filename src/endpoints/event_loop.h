#pragma once

// The endpoints server's one thread: an epoll loop over non-blocking sockets that reads
// request heads under a deadline, answers them with the routes, and keeps every peer, and
// every connection, within the server's limits by closing the oldest. Internal to the
// endpoints module.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "certctl/endpoints/server.h"
#include "certctl/util/result.h"

namespace certctl::endpoints {

class EventLoop {
 public:
  // Takes the listening socket (non-blocking, already listening).
  static Result<std::unique_ptr<EventLoop>> Create(int listen_socket, Routes routes,
                                                   const ServerLimits& limits);
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;
  ~EventLoop();  // closes every socket

  // Serves until Wake(); call from one thread.
  void Run();
  // Makes Run return; from any thread, any number of times.
  void Wake();

 private:
  using Clock = std::chrono::steady_clock;
  struct Connection {
    int socket = -1;
    std::string peer;  // the source address's bytes: the unit of the per-peer cap
    std::string in;
    std::string out;
    std::size_t sent = 0;  // of out
    Clock::time_point deadline;
    bool close_after_write = false;
    bool draining = false;  // answered, write side shut, reading to EOF before closing
    std::size_t drained = 0;
    bool peer_done = false;  // read EOF
    bool spoke = false;      // sent at least one byte: evicted after the silent ones
    std::uint32_t interest = 0;
  };

  EventLoop(int listen_socket, Routes routes, const ServerLimits& limits);
  void AcceptReady(Clock::time_point now);
  bool AcceptOne(Clock::time_point now);
  void Admit(int socket, std::string peer, Clock::time_point now);
  std::vector<std::uint64_t> PeerConnections(const std::string& peer) const;  // oldest first
  std::vector<std::uint64_t> AllConnections() const;                          // oldest first
  void EvictOneOf(const std::vector<std::uint64_t>& ids, std::uint64_t admitted);
  void PauseAccepting(Clock::time_point now);
  void OnEvent(std::uint64_t id, std::uint32_t events, Clock::time_point now);
  bool ReadAvailable(Connection& connection);
  bool Drain(Connection& connection);
  bool Progress(Connection& connection, Clock::time_point now);
  bool Flush(Connection& connection);
  void Watch(std::uint64_t id, Connection& connection);
  void Close(std::uint64_t id);
  void ExpireDeadlines(Clock::time_point now);
  int MillisecondsToNextDeadline(Clock::time_point now) const;

  int listen_socket_;
  int epoll_ = -1;
  int wake_ = -1;
  int reserve_ = -1;  // a spare descriptor, given up to shed a connection when none is left
  Routes routes_;
  ServerLimits limits_;
  std::uint64_t next_id_;
  std::map<std::uint64_t, Connection> connections_;  // by id: oldest first
  std::map<std::string, std::set<std::uint64_t>, std::less<>> by_peer_;
  std::optional<Clock::time_point> accept_paused_until_;
};

}  // namespace certctl::endpoints
