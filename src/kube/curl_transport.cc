// The only file that includes <curl/curl.h>.
#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <curl/curl.h>

#include "certctl/kube/transport.h"

#include <dlfcn.h>

namespace certctl::kube {
namespace {

// libcurl is loaded on first use rather than linked: Debian's libcurl pulls in some thirty
// shared libraries (LDAP, Kerberos, SSH, GnuTLS for RTMP, ...) whose loading and start-up
// cost about 9 ms, which every command would pay, also the offline ones. The static build
// (CERTCTL_CURL_LINKED, cmake/static.cmake) links a libcurl of its own that needs none of
// them and fills the same table from it.
struct CurlApi {
  CURLcode (*global_init)(long flags);
  CURL* (*easy_init)();
  CURLcode (*easy_setopt)(CURL* handle, CURLoption option, ...);
  CURLcode (*easy_perform)(CURL* handle);
  void (*easy_reset)(CURL* handle);
  void (*easy_cleanup)(CURL* handle);
  const char* (*easy_strerror)(CURLcode code);
  CURLM* (*multi_init)();
  CURLMcode (*multi_add_handle)(CURLM* multi, CURL* handle);
  CURLMcode (*multi_remove_handle)(CURLM* multi, CURL* handle);
  CURLMcode (*multi_perform)(CURLM* multi, int* running);
  CURLMcode (*multi_poll)(CURLM* multi, struct curl_waitfd* extra, unsigned int count,
                          int timeout_ms, int* numfds);
  CURLMcode (*multi_wakeup)(CURLM* multi);
  CURLMsg* (*multi_info_read)(CURLM* multi, int* queued);
  CURLMcode (*multi_cleanup)(CURLM* multi);
  const char* (*multi_strerror)(CURLMcode code);
  curl_slist* (*slist_append)(curl_slist* list, const char* text);
  void (*slist_free_all)(curl_slist* list);
  CURLU* (*url)();
  void (*url_cleanup)(CURLU* url);
  CURLUcode (*url_get)(const CURLU* url, CURLUPart part, char** out, unsigned int flags);
  CURLUcode (*url_set)(CURLU* url, CURLUPart part, const char* text, unsigned int flags);
  void (*free)(void* pointer);
  curl_version_info_data* (*version_info)(CURLversion version);
};

CurlApi curl_api;

// Fills curl_api once; an empty string means it is ready, else what went wrong.
const std::string& LoadCurl() {
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] {
#ifdef CERTCTL_CURL_LINKED
    curl_api.global_init = &curl_global_init;
    curl_api.easy_init = &curl_easy_init;
    curl_api.easy_setopt = &curl_easy_setopt;
    curl_api.easy_perform = &curl_easy_perform;
    curl_api.easy_reset = &curl_easy_reset;
    curl_api.easy_cleanup = &curl_easy_cleanup;
    curl_api.easy_strerror = &curl_easy_strerror;
    curl_api.multi_init = &curl_multi_init;
    curl_api.multi_add_handle = &curl_multi_add_handle;
    curl_api.multi_remove_handle = &curl_multi_remove_handle;
    curl_api.multi_perform = &curl_multi_perform;
    curl_api.multi_poll = &curl_multi_poll;
    curl_api.multi_wakeup = &curl_multi_wakeup;
    curl_api.multi_info_read = &curl_multi_info_read;
    curl_api.multi_cleanup = &curl_multi_cleanup;
    curl_api.multi_strerror = &curl_multi_strerror;
    curl_api.slist_append = &curl_slist_append;
    curl_api.slist_free_all = &curl_slist_free_all;
    curl_api.url = &curl_url;
    curl_api.url_cleanup = &curl_url_cleanup;
    // Before 8.0 curl_url_get took a non-const handle; it never changed it.
    curl_api.url_get = [](const CURLU* url, CURLUPart part, char** out, unsigned int flags) {
      return curl_url_get(const_cast<CURLU*>(url), part, out, flags);
    };
    curl_api.url_set = &curl_url_set;
    curl_api.free = &curl_free;
    curl_api.version_info = &curl_version_info;
#else
    // Never closed: the process keeps libcurl until it exits.
    void* library = ::dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* reason = ::dlerror();
      failure = std::string("cannot load libcurl.so.4: ") + (reason ? reason : "unknown error");
      return;
    }
    auto bind = [&](auto& function, const char* name) {
      void* symbol = ::dlsym(library, name);
      if (symbol == nullptr && failure.empty()) {
        failure = std::string("libcurl.so.4 lacks ") + name;
      }
      function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(symbol);
    };
    bind(curl_api.global_init, "curl_global_init");
    bind(curl_api.easy_init, "curl_easy_init");
    bind(curl_api.easy_setopt, "curl_easy_setopt");
    bind(curl_api.easy_perform, "curl_easy_perform");
    bind(curl_api.easy_reset, "curl_easy_reset");
    bind(curl_api.easy_cleanup, "curl_easy_cleanup");
    bind(curl_api.easy_strerror, "curl_easy_strerror");
    bind(curl_api.multi_init, "curl_multi_init");
    bind(curl_api.multi_add_handle, "curl_multi_add_handle");
    bind(curl_api.multi_remove_handle, "curl_multi_remove_handle");
    bind(curl_api.multi_perform, "curl_multi_perform");
    bind(curl_api.multi_poll, "curl_multi_poll");
    bind(curl_api.multi_wakeup, "curl_multi_wakeup");
    bind(curl_api.multi_info_read, "curl_multi_info_read");
    bind(curl_api.multi_cleanup, "curl_multi_cleanup");
    bind(curl_api.multi_strerror, "curl_multi_strerror");
    bind(curl_api.slist_append, "curl_slist_append");
    bind(curl_api.slist_free_all, "curl_slist_free_all");
    bind(curl_api.url, "curl_url");
    bind(curl_api.url_cleanup, "curl_url_cleanup");
    bind(curl_api.url_get, "curl_url_get");
    bind(curl_api.url_set, "curl_url_set");
    bind(curl_api.free, "curl_free");
    bind(curl_api.version_info, "curl_version_info");
#endif
  });
  return failure;
}

// Only called once LoadCurl() succeeded: a transport exists only after that.
const CurlApi& Curl() { return curl_api; }

// Idle easy handles kept for reuse (each holds its own live connections).
constexpr std::size_t kMaxIdleHandles = 8;
constexpr long kConnectTimeoutMs = 10000;
// How often a quiet stream looks at `cancelled` when nobody wakes it (WakeStreams does at
// once): rarely, so an idle process sleeps instead of waking for every watch ten times a second.
constexpr int kStreamPollMs = 1000;

struct EasyDeleter {
  void operator()(CURL* handle) const { Curl().easy_cleanup(handle); }
};
using EasyHandle = std::unique_ptr<CURL, EasyDeleter>;

struct MultiDeleter {
  void operator()(CURLM* handle) const { Curl().multi_cleanup(handle); }
};
using MultiHandle = std::unique_ptr<CURLM, MultiDeleter>;

struct SlistDeleter {
  void operator()(curl_slist* list) const { Curl().slist_free_all(list); }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

struct UrlDeleter {
  void operator()(CURLU* url) const { Curl().url_cleanup(url); }
};

CURLcode GlobalInit() {
  static std::once_flag once;
  static CURLcode result = CURLE_OK;
  std::call_once(once, [] { result = Curl().global_init(CURL_GLOBAL_DEFAULT); });
  return result;
}

bool Append(Slist& list, const std::string& line) {
  curl_slist* appended = Curl().slist_append(list.get(), line.c_str());
  if (appended == nullptr) {
    return false;
  }
  static_cast<void>(list.release());  // curl_slist_append returned the same list, now longer
  list.reset(appended);
  return true;
}

std::string Lower(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower;
}

std::string TrimSpace(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return {};
  }
  const auto last = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(first, last - first + 1));
}

// A peer that fails TLS verification stays untrusted however often we ask, and a URL curl
// cannot use stays unusable; everything else (refused, reset, timeout, a torn handshake) may
// pass.
ErrorCode CodeForCurlError(CURLcode code) {
  switch (code) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_CRL_BADFILE:
      return ErrorCode::kUnauthenticated;
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
      return ErrorCode::kInvalidArgument;
    default:
      return ErrorCode::kUnavailable;
  }
}

// Per-transfer state shared with curl's callbacks.
struct Transfer {
  HttpResponse response;
  const BodyChunkHandler* on_chunk = nullptr;  // set for streams
  bool stopped_by_handler = false;
  bool too_large = false;

  bool Success() const { return response.status >= 200 && response.status < 300; }
};

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  const std::string_view line(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) {
    // A new response (after 100 Continue or a proxy's CONNECT): start over.
    transfer->response.headers.clear();
    const auto space = line.find(' ');
    if (space != std::string_view::npos) {
      transfer->response.status = std::atoi(std::string(line.substr(space + 1, 3)).c_str());
    }
    return size * count;
  }
  const auto colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string name = Lower(TrimSpace(line.substr(0, colon)));
    std::string value = TrimSpace(line.substr(colon + 1));
    auto [it, inserted] = transfer->response.headers.emplace(name, value);
    if (!inserted) {
      it->second += ", " + value;
    }
  }
  return size * count;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  const std::string_view chunk(data, size * count);
  if (transfer->on_chunk != nullptr && transfer->Success()) {
    if (!(*transfer->on_chunk)(chunk)) {
      transfer->stopped_by_handler = true;
      return 0;  // makes curl abort the transfer with CURLE_WRITE_ERROR
    }
    return chunk.size();
  }
  if (transfer->response.body.size() + chunk.size() > kMaxResponseBytes) {
    transfer->too_large = true;
    return 0;
  }
  transfer->response.body.append(chunk);
  return chunk.size();
}

class CurlTransport final : public HttpTransport {
 public:
  explicit CurlTransport(TlsOptions tls) : tls_(std::move(tls)) {}

  Result<HttpResponse> Send(const HttpRequest& request) override {
    EasyHandle handle = Checkout();
    if (!handle) {
      return Fail(ErrorCode::kInternal, "curl_easy_init failed");
    }
    Transfer transfer;
    char error_buffer[CURL_ERROR_SIZE] = {};
    Slist headers;
    Slist connect_to;
    if (auto configured =
            Configure(handle.get(), request, transfer, error_buffer, headers, connect_to);
        !configured) {
      return Fail(configured.error());
    }
    const CURLcode code = Curl().easy_perform(handle.get());
    auto result = Finish(code, transfer, error_buffer);
    Return(std::move(handle));
    return result;
  }

  Result<HttpResponse> Stream(const HttpRequest& request, const BodyChunkHandler& on_chunk,
                              const std::function<bool()>& cancelled) override {
    // A fresh handle driven through a multi handle, so `cancelled` can be polled between
    // short waits even when the server sends nothing for minutes.
    EasyHandle handle(Curl().easy_init());
    MultiHandle multi(Curl().multi_init());
    if (!handle || !multi) {
      return Fail(ErrorCode::kInternal, "curl_easy_init/curl_multi_init failed");
    }
    Transfer transfer;
    transfer.on_chunk = &on_chunk;
    char error_buffer[CURL_ERROR_SIZE] = {};
    Slist headers;
    Slist connect_to;
    if (auto configured =
            Configure(handle.get(), request, transfer, error_buffer, headers, connect_to);
        !configured) {
      return Fail(configured.error());
    }
    if (Curl().multi_add_handle(multi.get(), handle.get()) != CURLM_OK) {
      return Fail(ErrorCode::kInternal, "curl_multi_add_handle failed");
    }
    // Registered before `cancelled` is first looked at: a WakeStreams after the cancellation
    // either finds this stream or happened before that first look, which then sees it.
    const StreamRegistration registration(*this, multi.get());
    CURLcode code = CURLE_OK;
    bool was_cancelled = false;
    while (true) {
      if (cancelled && cancelled()) {
        was_cancelled = true;
        break;
      }
      int running = 0;
      CURLMcode multi_code = Curl().multi_perform(multi.get(), &running);
      if (multi_code == CURLM_OK && running > 0) {
        multi_code = Curl().multi_poll(multi.get(), nullptr, 0, kStreamPollMs, nullptr);
      }
      if (multi_code != CURLM_OK) {
        Curl().multi_remove_handle(multi.get(), handle.get());
        return Fail(ErrorCode::kUnavailable, Curl().multi_strerror(multi_code));
      }
      if (running == 0) {
        int left = 0;
        while (CURLMsg* message = Curl().multi_info_read(multi.get(), &left)) {
          if (message->msg == CURLMSG_DONE) {
            code = message->data.result;
          }
        }
        break;
      }
    }
    Curl().multi_remove_handle(multi.get(), handle.get());
    if (was_cancelled) {
      transfer.response.body.clear();
      return transfer.response;
    }
    return Finish(code, transfer, error_buffer);
  }

  void WakeStreams() override {
    const std::lock_guard lock(streams_mutex_);
    for (CURLM* multi : streams_) {
      Curl().multi_wakeup(multi);  // its multi_poll returns, now or at its next call
    }
  }

 private:
  // Keeps a stream's multi handle known to WakeStreams while the stream runs.
  class StreamRegistration {
   public:
    StreamRegistration(CurlTransport& transport, CURLM* multi)
        : transport_(transport), multi_(multi) {
      const std::lock_guard lock(transport_.streams_mutex_);
      transport_.streams_.insert(multi_);
    }
    ~StreamRegistration() {
      const std::lock_guard lock(transport_.streams_mutex_);
      transport_.streams_.erase(multi_);
    }
    StreamRegistration(const StreamRegistration&) = delete;
    StreamRegistration& operator=(const StreamRegistration&) = delete;

   private:
    CurlTransport& transport_;
    CURLM* multi_;
  };

  EasyHandle Checkout() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!idle_.empty()) {
        EasyHandle handle = std::move(idle_.back());
        idle_.pop_back();
        // Forgets the options, keeps live connections and the TLS session cache.
        Curl().easy_reset(handle.get());
        return handle;
      }
    }
    return EasyHandle(Curl().easy_init());
  }

  void Return(EasyHandle handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (idle_.size() < kMaxIdleHandles) {
      idle_.push_back(std::move(handle));
    }
  }

  // curl's words for a failure: its detail, which often ends with the summary already
  // ("Failed to connect to h port 1 after 0 ms: Couldn't connect to server"), else the
  // summary and the detail. "after N ms" goes: it is this attempt's time, which reads as if
  // nothing was tried when the retries took seconds (the retrying layer says how long).
  static std::string CurlFailure(const std::string& summary, const std::string& detail) {
    std::string text = detail;
    for (std::size_t at = text.find(" after "); at != std::string::npos;
         at = text.find(" after ", at + 1)) {
      std::size_t end = at + 7;
      while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end])) != 0) {
        ++end;
      }
      if (end > at + 7 && text.compare(end, 3, " ms") == 0) {
        text.erase(at, end + 3 - at);
        break;
      }
    }
    if (text.empty()) {
      return summary;
    }
    return text.find(summary) != std::string::npos ? text : summary + ": " + text;
  }

  static Result<HttpResponse> Finish(CURLcode code, Transfer& transfer, const char* error_buffer) {
    if (transfer.stopped_by_handler) {
      return transfer.response;  // the caller asked to stop: not a failure
    }
    if (transfer.too_large) {
      return Fail(ErrorCode::kBadResponse, "the response body is larger than " +
                                               std::to_string(kMaxResponseBytes / (1024 * 1024)) +
                                               " MiB, more than any API object; not retried");
    }
    if (code != CURLE_OK) {
      return Fail(CodeForCurlError(code), CurlFailure(Curl().easy_strerror(code), error_buffer));
    }
    if (transfer.on_chunk != nullptr && transfer.Success()) {
      transfer.response.body.clear();
    }
    return transfer.response;
  }

  // tls-server-name: the URL names the expected server, so curl sends it as SNI and verifies
  // the certificate against it, exactly what Go's tls.Config.ServerName does; CONNECT_TO
  // makes curl open the TCP connection (or the proxy tunnel) to the real host, and the Host
  // header keeps naming the real host as Go sends it.
  Status RedirectForServerName(const std::string& url, std::string& effective_url, Slist& headers,
                               Slist& connect_to) const {
    std::unique_ptr<CURLU, UrlDeleter> parsed(Curl().url());
    if (!parsed || Curl().url_set(parsed.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) {
      return Fail(ErrorCode::kInvalidArgument, "cannot parse URL " + url);
    }
    char* host = nullptr;
    char* port = nullptr;
    char* explicit_port = nullptr;
    if (Curl().url_get(parsed.get(), CURLUPART_HOST, &host, 0) != CURLUE_OK ||
        Curl().url_get(parsed.get(), CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK) {
      Curl().free(host);
      Curl().free(port);
      return Fail(ErrorCode::kInvalidArgument, "cannot parse URL " + url);
    }
    const bool has_explicit_port =
        Curl().url_get(parsed.get(), CURLUPART_PORT, &explicit_port, 0) == CURLUE_OK;
    const std::string real_host(host);
    const std::string real_port(port);
    Curl().free(host);
    Curl().free(port);
    Curl().free(explicit_port);

    if (Curl().url_set(parsed.get(), CURLUPART_HOST, tls_.server_name.c_str(), 0) != CURLUE_OK) {
      return Fail(ErrorCode::kInvalidArgument,
                  "tls-server-name \"" + tls_.server_name + "\" is not a valid host name");
    }
    char* rewritten = nullptr;
    if (Curl().url_get(parsed.get(), CURLUPART_URL, &rewritten, 0) != CURLUE_OK) {
      return Fail(ErrorCode::kInvalidArgument, "cannot rewrite URL " + url);
    }
    effective_url = rewritten;
    Curl().free(rewritten);
    if (!Append(connect_to,
                tls_.server_name + ":" + real_port + ":" + real_host + ":" + real_port) ||
        !Append(headers, "Host: " + real_host + (has_explicit_port ? ":" + real_port : ""))) {
      return Fail(ErrorCode::kInternal, "out of memory");
    }
    return {};
  }

  Status Configure(CURL* handle, const HttpRequest& request, Transfer& transfer, char* error_buffer,
                   Slist& headers, Slist& connect_to) const {
    std::string url = request.url;
    const bool https = Lower(url.substr(0, 8)) == "https://";
    const bool override_name = https && !tls_.server_name.empty() && !tls_.insecure_skip_verify;
    if (override_name) {
      if (auto redirected = RedirectForServerName(request.url, url, headers, connect_to);
          !redirected) {
        return redirected;
      }
    }
    for (const auto& [name, value] : request.headers) {
      if (!Append(headers, name + ": " + value)) {
        return Fail(ErrorCode::kInternal, "out of memory");
      }
    }
    // No "Expect: 100-continue" round trip before large bodies.
    if (!Append(headers, "Expect:")) {
      return Fail(ErrorCode::kInternal, "out of memory");
    }

    bool ok = true;
    auto set = [&](CURLoption option, auto value) {
      ok = ok && Curl().easy_setopt(handle, option, value) == CURLE_OK;
    };
    set(CURLOPT_ERRORBUFFER, error_buffer);
    set(CURLOPT_URL, url.c_str());
    set(CURLOPT_PROTOCOLS_STR, "http,https");
    set(CURLOPT_FOLLOWLOCATION, 0L);
    set(CURLOPT_NOSIGNAL, 1L);
    set(CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
    set(CURLOPT_HTTPHEADER, headers.get());
    if (connect_to) {
      set(CURLOPT_CONNECT_TO, connect_to.get());
    }
    set(CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
    const long connect_timeout = request.timeout.count() > 0
                                     ? std::min<long>(kConnectTimeoutMs, request.timeout.count())
                                     : kConnectTimeoutMs;
    set(CURLOPT_CONNECTTIMEOUT_MS, connect_timeout);
    // Watches are quiet for minutes: no low-speed abort; keepalive finds dead peers.
    set(CURLOPT_LOW_SPEED_LIMIT, 0L);
    set(CURLOPT_LOW_SPEED_TIME, 0L);
    set(CURLOPT_TCP_KEEPALIVE, 1L);
    set(CURLOPT_TCP_KEEPIDLE, 30L);
    set(CURLOPT_TCP_KEEPINTVL, 15L);
    set(CURLOPT_HEADERFUNCTION, &OnHeader);
    set(CURLOPT_HEADERDATA, &transfer);
    set(CURLOPT_WRITEFUNCTION, &OnBody);
    set(CURLOPT_WRITEDATA, &transfer);

    if (request.method == "GET") {
      set(CURLOPT_HTTPGET, 1L);
    } else if (request.method == "POST") {
      set(CURLOPT_POST, 1L);
    } else {
      set(CURLOPT_CUSTOMREQUEST, request.method.c_str());
    }
    if (request.method != "GET" && (request.method == "POST" || !request.body.empty())) {
      set(CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
      set(CURLOPT_POSTFIELDS, request.body.c_str());
    }

    if (https) {
      if (tls_.insecure_skip_verify) {
        set(CURLOPT_SSL_VERIFYPEER, 0L);
        set(CURLOPT_SSL_VERIFYHOST, 0L);
      } else {
        set(CURLOPT_SSL_VERIFYPEER, 1L);
        set(CURLOPT_SSL_VERIFYHOST, 2L);
      }
      if (!tls_.ca_pem.empty()) {
        curl_blob ca{const_cast<char*>(tls_.ca_pem.data()), tls_.ca_pem.size(), CURL_BLOB_COPY};
        set(CURLOPT_CAINFO_BLOB, &ca);
        // Trust exactly these CAs: no default CA folder on top of the blob.
        set(CURLOPT_CAPATH, static_cast<const char*>(nullptr));
      }
      if (!tls_.client_cert_pem.empty()) {
        curl_blob cert{const_cast<char*>(tls_.client_cert_pem.data()), tls_.client_cert_pem.size(),
                       CURL_BLOB_COPY};
        curl_blob key{const_cast<char*>(tls_.client_key_pem.data()), tls_.client_key_pem.size(),
                      CURL_BLOB_COPY};
        set(CURLOPT_SSLCERT_BLOB, &cert);
        set(CURLOPT_SSLCERTTYPE, "PEM");
        set(CURLOPT_SSLKEY_BLOB, &key);
        set(CURLOPT_SSLKEYTYPE, "PEM");
      }
    }
    if (!ok) {
      return Fail(ErrorCode::kInternal,
                  "libcurl rejected an option (needs libcurl >= 7.85 built with OpenSSL)");
    }
    return {};
  }

  const TlsOptions tls_;
  std::mutex mutex_;
  std::vector<EasyHandle> idle_;
  std::mutex streams_mutex_;
  std::set<CURLM*> streams_;  // the multi handles of the streams in progress
};

}  // namespace

Result<std::unique_ptr<HttpTransport>> MakeCurlTransport(const TlsOptions& tls) {
  if (const std::string& failure = LoadCurl(); !failure.empty()) {
    return Fail(ErrorCode::kInternal, failure);
  }
  if (const CURLcode code = GlobalInit(); code != CURLE_OK) {
    return Fail(ErrorCode::kInternal,
                std::string("curl_global_init failed: ") + Curl().easy_strerror(code));
  }
  if (tls.client_cert_pem.empty() != tls.client_key_pem.empty()) {
    return Fail(ErrorCode::kInvalidArgument,
                "TLS client certificate and key must be given together");
  }
  const curl_version_info_data* info = Curl().version_info(CURLVERSION_NOW);
  if (info == nullptr || info->version_num < 0x075500 || info->ssl_version == nullptr ||
      std::string_view(info->ssl_version).find("OpenSSL") == std::string_view::npos) {
    return Fail(ErrorCode::kInternal,
                "libcurl 7.85 or newer built with OpenSSL is required (in-memory TLS blobs)");
  }
  return std::unique_ptr<HttpTransport>(std::make_unique<CurlTransport>(tls));
}

}  // namespace certctl::kube
