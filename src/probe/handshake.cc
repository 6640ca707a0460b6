#include "certctl/probe/handshake.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <memory>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include "certctl/util/safety_controls.h"

#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

namespace certctl::probe {
namespace {

using Deadline = std::chrono::steady_clock::time_point;

struct SslContextFree {
  void operator()(SSL_CTX* context) const { SSL_CTX_free(context); }
};
struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};
struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* certificate) const { X509_free(certificate); }
};

class Socket {
 public:
  explicit Socket(int descriptor) : descriptor_(descriptor) {}
  Socket(Socket&& other) noexcept : descriptor_(other.descriptor_) { other.descriptor_ = -1; }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  Socket& operator=(Socket&&) = delete;
  ~Socket() {
    if (descriptor_ >= 0) {
      ::close(descriptor_);
    }
  }
  int get() const { return descriptor_; }

 private:
  int descriptor_;
};

// A peer that closes mid-handshake makes the next write raise SIGPIPE, which would end the
// process. OpenSSL writes with plain write(2), so block the signal on this thread while the
// exchange lasts and discard one it raised.
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &previous_);
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;
  ~SigpipeBlocked() {
    if (!was_pending_) {
      const timespec no_wait{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &no_wait) == SIGPIPE) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }

 private:
  sigset_t pipe_{};
  sigset_t previous_{};
  bool was_pending_ = false;
};

int MillisecondsLeft(Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// The newest queued OpenSSL reason, and the queue emptied so it does not leak into the next
// unrelated call on this thread.
std::string OpenSslReason() {
  const unsigned long code = ERR_peek_last_error();
  char text[256] = {};
  if (code != 0) {
    ERR_error_string_n(code, text, sizeof(text));
  }
  ERR_clear_error();
  const char* reason = code != 0 ? ERR_reason_error_string(code) : nullptr;
  return reason != nullptr ? reason : text;
}

// Waits until `descriptor` is readable or writable (as asked) or the deadline passes.
bool WaitFor(int descriptor, short events, Deadline deadline) {
  pollfd entry{descriptor, events, 0};
  int ready = 0;
  do {
    ready = ::poll(&entry, 1, MillisecondsLeft(deadline));
  } while (ready < 0 && errno == EINTR);
  return ready > 0;
}

Result<Socket> Connect(const HostPort& address, Deadline deadline) {
  const std::string where = FormatHostPort(address);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(address.port);
  if (const int failed = ::getaddrinfo(address.host.c_str(), port.c_str(), &hints, &found);
      failed != 0) {
    return Fail(ErrorCode::kUnavailable,
                "cannot resolve " + where + ": " + std::string(::gai_strerror(failed)));
  }
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, &::freeaddrinfo);
  std::string why = "no address";
  for (const addrinfo* candidate = found; candidate != nullptr; candidate = candidate->ai_next) {
    Socket socket(::socket(candidate->ai_family,
                           candidate->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                           candidate->ai_protocol));
    if (socket.get() < 0) {
      why = std::strerror(errno);
      continue;
    }
    if (::connect(socket.get(), candidate->ai_addr, candidate->ai_addrlen) == 0) {
      return socket;
    }
    if (errno != EINPROGRESS) {
      why = std::strerror(errno);
      continue;
    }
    if (!WaitFor(socket.get(), POLLOUT, deadline)) {
      why = "timed out";
      continue;
    }
    int error = 0;
    socklen_t length = sizeof(error);
    ::getsockopt(socket.get(), SOL_SOCKET, SO_ERROR, &error, &length);
    if (error == 0) {
      return socket;
    }
    why = std::strerror(error);
  }
  return Fail(ErrorCode::kUnavailable, "cannot connect to " + where + ": " + why);
}

// A client context that trusts exactly the certificates of `bundle_pem`.
Result<std::unique_ptr<SSL_CTX, SslContextFree>> TrustingOnly(const std::string& bundle_pem) {
  std::unique_ptr<SSL_CTX, SslContextFree> context(SSL_CTX_new(TLS_client_method()));
  if (!context) {
    return Fail(ErrorCode::kInternal, "cannot create a TLS context: " + OpenSslReason());
  }
  SSL_CTX_set_min_proto_version(context.get(), TLS1_2_VERSION);
  SSL_CTX_set_verify(context.get(), SSL_VERIFY_PEER, nullptr);
  X509_STORE* store = SSL_CTX_get_cert_store(context.get());
  const std::unique_ptr<BIO, BioFree> input(
      BIO_new_mem_buf(bundle_pem.data(), static_cast<int>(bundle_pem.size())));
  int trusted = 0;
  while (true) {
    std::unique_ptr<X509, X509Free> certificate(
        PEM_read_bio_X509(input.get(), nullptr, nullptr, nullptr));
    if (!certificate) {
      break;
    }
    if (X509_STORE_add_cert(store, certificate.get()) == 1) {
      ++trusted;
    }
  }
  ERR_clear_error();  // the read past the last certificate queues a "no start line"
  if (trusted == 0) {
    return Fail(ErrorCode::kInvalidArgument, "the caBundle holds no certificate");
  }
  return context;
}

// The peer's certificate as PEM; empty when it sent none.
std::string ServedLeafPem(SSL* ssl) {
  X509* served = SSL_get0_peer_certificate(ssl);
  if (served == nullptr) {
    return "";
  }
  const std::unique_ptr<BIO, BioFree> output(BIO_new(BIO_s_mem()));
  if (!output || PEM_write_bio_X509(output.get(), served) != 1) {
    ERR_clear_error();
    return "";
  }
  char* data = nullptr;
  const long length = BIO_get_mem_data(output.get(), &data);
  return length > 0 ? std::string(data, static_cast<std::size_t>(length)) : "";
}

}  // namespace

Status VerifyHandshake(const HostPort& address, const std::string& server_name,
                       const std::string& bundle_pem, std::chrono::milliseconds timeout) {
  return DialAsApiServer(address, server_name, bundle_pem, timeout).status;
}

HandshakeOutcome DialAsApiServer(const HostPort& address, const std::string& server_name,
                                 const std::string& bundle_pem, std::chrono::milliseconds timeout) {
  HandshakeOutcome outcome;
  const auto ended = [&outcome](Status status) {
    outcome.status = std::move(status);
    return std::move(outcome);
  };
  const Deadline deadline = std::chrono::steady_clock::now() + timeout;
  const SigpipeBlocked no_sigpipe;
  const std::string where = FormatHostPort(address);
  auto context = TrustingOnly(bundle_pem);
  if (!context) {
    return ended(Fail(context.error()));
  }
  auto socket = Connect(address, deadline);
  if (!socket) {
    return ended(Fail(socket.error()));
  }
  const std::unique_ptr<SSL, SslFree> ssl(SSL_new(context->get()));
  if (!ssl || SSL_set_fd(ssl.get(), socket->get()) != 1 ||
      SSL_set_tlsext_host_name(ssl.get(), server_name.c_str()) != 1 ||
      (!SafetyRemoved("names") && SSL_set1_host(ssl.get(), server_name.c_str()) != 1)) {
    return ended(Fail(ErrorCode::kInternal, "cannot set up a TLS handshake with " + where +
                                                " for " + server_name + ": " + OpenSslReason()));
  }
  while (true) {
    const int result = SSL_connect(ssl.get());
    if (result == 1) {
      break;
    }
    const int error = SSL_get_error(ssl.get(), result);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      if (!WaitFor(socket->get(), error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline)) {
        ERR_clear_error();
        return ended(Fail(ErrorCode::kUnavailable, "TLS handshake with " + where + " timed out"));
      }
      continue;
    }
    if (const long verified = SSL_get_verify_result(ssl.get()); verified != X509_V_OK) {
      ERR_clear_error();
      const std::string reason = verified == X509_V_ERR_HOSTNAME_MISMATCH
                                     ? "its certificate is not valid for " + server_name
                                     : "its certificate does not verify against the caBundle: " +
                                           std::string(X509_verify_cert_error_string(verified));
      outcome.name_not_covered = verified == X509_V_ERR_HOSTNAME_MISMATCH;
      return ended(
          Fail(ErrorCode::kFailedPrecondition, "TLS handshake with " + where + ": " + reason));
    }
    if (error == SSL_ERROR_SYSCALL || error == SSL_ERROR_ZERO_RETURN) {
      ERR_clear_error();
      return ended(Fail(ErrorCode::kUnavailable,
                        "TLS handshake with " + where + ": the connection was closed"));
    }
    return ended(Fail(ErrorCode::kUnavailable,
                      "TLS handshake with " + where + " failed: " + OpenSslReason()));
  }
  outcome.served_leaf_pem = ServedLeafPem(ssl.get());
  // A polite close; the verdict is already in, so its outcome does not matter.
  SSL_shutdown(ssl.get());
  ERR_clear_error();
  return outcome;
}

}  // namespace certctl::probe
