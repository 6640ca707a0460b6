#pragma once

// A client of bare sockets for the endpoints server's tests: it sends exactly the bytes a
// test means (slow, pipelined, malformed) from a chosen loopback address, and reads what
// comes back. Every read gives up after kReadBound, so a test fails instead of hanging.

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace certctl::endpoints::testing {

inline constexpr std::chrono::seconds kReadBound{10};

class RawClient {
 public:
  // Connects to 127.0.0.1:port from `source` (any 127/8 address is loopback on Linux).
  explicit RawClient(int port, const char* source = "127.0.0.1") {
    socket_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &from.sin_addr);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    connected_ = ::bind(socket_, reinterpret_cast<sockaddr*>(&from), sizeof(from)) == 0 &&
                 ::connect(socket_, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0;
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;
  ~RawClient() { ::close(socket_); }

  bool connected() const { return connected_; }

  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      const auto sent = ::send(socket_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (sent <= 0) {
        return false;
      }
      bytes.remove_prefix(static_cast<std::size_t>(sent));
    }
    return true;
  }

  void ShutdownWrite() { ::shutdown(socket_, SHUT_WR); }

  // What arrives next, appended to what is buffered; false once the connection has ended
  // (EOF or reset) or when nothing came within kReadBound.
  bool ReadMore(std::chrono::milliseconds bound = kReadBound) {
    pollfd wait{socket_, POLLIN, 0};
    if (::poll(&wait, 1, static_cast<int>(bound.count())) != 1) {
      return false;
    }
    char chunk[4096];
    const auto got = ::recv(socket_, chunk, sizeof(chunk), 0);
    if (got <= 0) {
      ended_ = true;
      return false;
    }
    buffer_.append(chunk, static_cast<std::size_t>(got));
    return true;
  }

  // One response: its head and, unless `head_only`, a body of its Content-Length; "" if the
  // connection ended first.
  std::string ReadResponse(bool head_only = false) {
    std::size_t end = std::string::npos;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!ReadMore()) {
        return "";
      }
    }
    std::size_t length = 0;
    const auto field = buffer_.find("\r\nContent-Length: ");
    if (field != std::string::npos && field < end && !head_only) {
      length = std::stoul(buffer_.substr(field + 18));
    }
    while (buffer_.size() < end + 4 + length) {
      if (!ReadMore()) {
        return "";
      }
    }
    std::string response = buffer_.substr(0, end + 4 + length);
    buffer_.erase(0, end + 4 + length);
    return response;
  }

  // Waits (at most kReadBound) for the server to end the connection, discarding what it
  // still sends; true if it did.
  bool WaitClosed() { return WaitClosedFor(kReadBound); }

  bool WaitClosedFor(std::chrono::milliseconds bound) {
    while (!ended_) {
      if (!ReadMore(bound) && !ended_) {
        return false;
      }
    }
    return true;
  }

 private:
  int socket_ = -1;
  bool connected_ = false;
  bool ended_ = false;
  std::string buffer_;
};

inline std::string Get(std::string_view path, std::string_view extra_fields = "") {
  return "GET " + std::string(path) + " HTTP/1.1\r\nHost: test\r\n" + std::string(extra_fields) +
         "\r\n";
}

inline int StatusOf(const std::string& response) {
  return response.size() > 12 ? std::stoi(response.substr(9, 3)) : 0;
}

inline std::string BodyOf(const std::string& response) {
  const auto end = response.find("\r\n\r\n");
  return end == std::string::npos ? "" : response.substr(end + 4);
}

}  // namespace certctl::endpoints::testing
