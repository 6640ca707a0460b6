#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>

namespace certctl::testing {

// A loopback server on a free port that plays a webhook's listener for handshake tests.
class TlsServer {
 public:
  enum class Mode {
    kTls,        // completes TLS handshakes with the current pair
    kSilent,     // accepts and never answers
    kPlaintext,  // accepts, writes an HTTP error in clear text and closes
  };

  explicit TlsServer(Mode mode, std::string cert_pem = "", std::string key_pem = "");
  TlsServer(const TlsServer&) = delete;
  TlsServer& operator=(const TlsServer&) = delete;
  ~TlsServer();

  int port() const { return port_; }
  // Serves this pair from the next connection on (a webhook that reloaded its files).
  void SetPair(std::string cert_pem, std::string key_pem);
  // Handshakes completed so far.
  int handshakes() const { return handshakes_; }
  // Connections accepted so far.
  int accepted() const { return accepted_; }

 private:
  void Serve();

  Mode mode_;
  std::mutex pair_mutex_;
  std::string cert_pem_;
  std::string key_pem_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> handshakes_{0};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

}  // namespace certctl::testing
