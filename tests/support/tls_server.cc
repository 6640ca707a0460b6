#include "support/tls_server.h"

#include <csignal>
#include <memory>
#include <stdexcept>
#include <vector>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

namespace certctl::testing {
namespace {

// An SSL_CTX serving `cert_pem` (leaf first, chain after) and `key_pem`.
SSL_CTX* ServingContext(const std::string& cert_pem, const std::string& key_pem) {
  SSL_CTX* context = SSL_CTX_new(TLS_server_method());
  BIO* certs = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  X509* leaf = PEM_read_bio_X509(certs, nullptr, nullptr, nullptr);
  SSL_CTX_use_certificate(context, leaf);
  X509_free(leaf);
  BIO_free(certs);
  BIO* key_input = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_input, nullptr, nullptr, nullptr);
  SSL_CTX_use_PrivateKey(context, key);
  EVP_PKEY_free(key);
  BIO_free(key_input);
  ERR_clear_error();
  return context;
}

}  // namespace

TlsServer::TlsServer(Mode mode, std::string cert_pem, std::string key_pem)
    : mode_(mode), cert_pem_(std::move(cert_pem)), key_pem_(std::move(key_pem)) {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      ::listen(listener_, 16) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("TlsServer: cannot listen on 127.0.0.1");
  }
  port_ = ntohs(address.sin_port);
  thread_ = std::thread([this] { Serve(); });
}

TlsServer::~TlsServer() {
  stopping_ = true;
  thread_.join();
  ::close(listener_);
}

void TlsServer::SetPair(std::string cert_pem, std::string key_pem) {
  const std::lock_guard lock(pair_mutex_);
  cert_pem_ = std::move(cert_pem);
  key_pem_ = std::move(key_pem);
}

void TlsServer::Serve() {
  // A client that hangs up mid-handshake must not end the test process.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  std::vector<int> held;  // silent mode keeps connections open until the end
  while (!stopping_) {
    pollfd entry{listener_, POLLIN, 0};
    if (::poll(&entry, 1, 20) <= 0) {
      continue;
    }
    const int connection = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) {
      continue;
    }
    ++accepted_;
    if (mode_ == Mode::kSilent) {
      held.push_back(connection);
      continue;
    }
    if (mode_ == Mode::kPlaintext) {
      constexpr char kAnswer[] = "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n";
      [[maybe_unused]] const auto written = ::write(connection, kAnswer, sizeof(kAnswer) - 1);
      ::close(connection);
      continue;
    }
    SSL_CTX* context = nullptr;
    {
      const std::lock_guard lock(pair_mutex_);
      context = ServingContext(cert_pem_, key_pem_);
    }
    SSL* ssl = SSL_new(context);
    SSL_set_fd(ssl, connection);
    timeval timeout{2, 0};
    ::setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    if (SSL_accept(ssl) == 1) {
      ++handshakes_;
      SSL_shutdown(ssl);
    }
    ERR_clear_error();
    SSL_free(ssl);
    SSL_CTX_free(context);
    ::close(connection);
  }
  for (const int connection : held) {
    ::close(connection);
  }
}

}  // namespace certctl::testing
