#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "certctl/util/result.h"

namespace certctl::kube {

// The largest response body a transport accepts, and the longest watch event: the API
// server stores objects of at most 1.5 MiB and lists are paged, so anything larger is a broken
// or hostile peer. Exceeding it is kBadResponse, which is never retried.
inline constexpr std::size_t kMaxResponseBytes = 4 * 1024 * 1024;

struct HttpRequest {
  std::string method;  // GET, POST, PUT, PATCH, DELETE
  std::string url;     // absolute: https://host:port/api/v1/...
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::chrono::milliseconds timeout{30000};  // whole request; 0 = none (watches)
};

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

// Receives a streamed body piece by piece; returning false stops the stream.
using BodyChunkHandler = std::function<bool(std::string_view chunk)>;

// The seam between the REST client and the network: RestClient speaks HTTP through this,
// unit tests through a fake. Transient transport failures (refused, reset, timeout) are
// kUnavailable with the reason; a server whose certificate fails verification is
// kUnauthenticated (retrying cannot help); a body over kMaxResponseBytes is kBadResponse. HTTP
// error statuses are responses, not errors.
class HttpTransport {
 public:
  virtual ~HttpTransport() = default;

  virtual Result<HttpResponse> Send(const HttpRequest& request) = 0;

  // For watches. A 2xx body goes to `on_chunk` as it arrives and the returned response has
  // an empty body; any other status is returned with its whole body. `cancelled` is looked
  // at whenever WakeStreams is called and at least every second otherwise, so a stream with
  // no traffic can still be stopped without waking the process many times a second.
  virtual Result<HttpResponse> Stream(const HttpRequest& request, const BodyChunkHandler& on_chunk,
                                      const std::function<bool()>& cancelled) = 0;

  // Makes every Stream in progress look at its `cancelled` now; call it after making that
  // true. Transports whose streams poll often enough need not override it.
  virtual void WakeStreams() {}
};

struct TlsOptions {
  std::string ca_pem;           // trust exactly these CAs; empty: the system store
  std::string client_cert_pem;  // mutual TLS, both or neither
  std::string client_key_pem;
  bool insecure_skip_verify = false;
  std::string server_name;  // overrides the name verified (kubeconfig tls-server-name)
};

// The production transport on libcurl (the only file that includes <curl/curl.h>).
Result<std::unique_ptr<HttpTransport>> MakeCurlTransport(const TlsOptions& tls);

}  // namespace certctl::kube
