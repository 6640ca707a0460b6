#include <algorithm>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <utility>

#include "certctl/kube/client.h"
#include "certctl/kube/object.h"
#include "certctl/kube/watch_decoder.h"
#include "certctl/util/version.h"

#include "kube/errors.h"
#include "kube/rate_limiter.h"
#include "kube/token_source.h"

namespace certctl::kube {
namespace {

// A watch that outlives the timeout it asked the server for by this much is presumed dead.
constexpr std::chrono::seconds kWatchTimeoutMargin{60};
// A List certctl makes is of its own webhook configurations: a handful of pages. These bounds
// stop a server whose continue tokens never end from holding us, or our memory, forever.
constexpr int kMaxListPages = 1000;
constexpr std::size_t kMaxListBytes = 4 * kMaxResponseBytes;

constexpr char kJson[] = "application/json";

std::string PercentEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string encoded;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte >= 'A' && byte <= 'Z') || (byte >= 'a' && byte <= 'z') ||
        (byte >= '0' && byte <= '9') || c == '-' || c == '_' || c == '.' || c == '~') {
      encoded += c;
    } else {
      encoded += '%';
      encoded += kHex[byte >> 4];
      encoded += kHex[byte & 15];
    }
  }
  return encoded;
}

class Query {
 public:
  Query& Add(std::string_view name, std::string_view value) {
    text_ += text_.empty() ? '?' : '&';
    text_ += PercentEncode(name);
    text_ += '=';
    text_ += PercentEncode(value);
    return *this;
  }
  Query& AddIfSet(std::string_view name, std::string_view value) {
    return value.empty() ? *this : Add(name, value);
  }
  const std::string& str() const { return text_; }

 private:
  std::string text_;
};

std::string_view PatchMediaType(PatchType type) {
  switch (type) {
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kJsonPatch:
      return "application/json-patch+json";
    case PatchType::kStrategicMerge:
      return "application/strategic-merge-patch+json";
  }
  return "application/merge-patch+json";
}

bool IsSuccess(int status) { return status >= 200 && status < 300; }

// JSON text for a request body; nlohmann throws on invalid UTF-8, which stays in here.
Result<std::string> Serialize(const Json& object, std::string_view what) {
  try {
    return object.dump();
  } catch (const Json::exception& e) {
    return Fail(ErrorCode::kInvalidArgument,
                std::string(what) + ": cannot encode the request body: " + e.what());
  }
}

// Decodes a success body. Messages never quote it: it may hold a Secret.
Result<Json> DecodeObject(const HttpResponse& response, std::string_view what) {
  Json body = Json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object()) {
    return Fail(ErrorCode::kBadResponse, std::string(what) + ": the server answered HTTP " +
                                             std::to_string(response.status) +
                                             " with a body that is not a JSON object");
  }
  return body;
}

// A write that, should it run twice, cannot do harm: the second run fails (AlreadyExists,
// Conflict, a failed `test`) or changes nothing.
bool IsGuardedJsonPatch(PatchType type, const Json& patch) {
  if (type != PatchType::kJsonPatch || !patch.is_array()) {
    return false;
  }
  return std::any_of(patch.begin(), patch.end(), [](const Json& operation) {
    return operation.is_object() && operation.value("op", Json()) == "test";
  });
}

// "250ms", "1.5s", "10s": how long a retry waits, for the log.
std::string FormatWait(std::chrono::milliseconds wait) {
  if (wait < std::chrono::seconds(1)) {
    return std::to_string(wait.count()) + "ms";
  }
  const long tenths = static_cast<long>(wait.count() / 100);
  return std::to_string(tenths / 10) + (tenths % 10 != 0 ? "." + std::to_string(tenths % 10) : "") +
         "s";
}

class RestClient final : public Client {
 public:
  RestClient(ClusterConfig config, std::unique_ptr<HttpTransport> transport,
             const ClientOptions& options, const Clock& clock)
      : config_(std::move(config)),
        transport_(std::move(transport)),
        options_(options),
        clock_(clock),
        limiter_(options.qps, options.burst, clock),
        tokens_(config_, clock),
        user_agent_(options.user_agent.empty() ? "certctl/" + std::string(Version())
                                               : options.user_agent),
        random_(std::random_device{}()) {}

  Result<std::optional<Json>> Get(const ResourceType& type, std::string_view ns,
                                  std::string_view name) override {
    const std::string what = Describe("get", type, ns, name);
    auto path = ItemPath(type, ns, name, what);
    if (!path) {
      return Fail(path.error());
    }
    auto response = Execute(NewRequest("GET", *path), Safety::kRepeatable, what);
    if (!response) {
      return Fail(response.error());
    }
    if (response->status == 404) {
      return std::optional<Json>();
    }
    if (!IsSuccess(response->status)) {
      return Fail(ErrorFromResponse(*response, what));
    }
    auto object = DecodeObject(*response, what);
    if (!object) {
      return Fail(object.error());
    }
    if (auto same = ExpectIdentity(*object, type, ns, name, what); !same) {
      return Fail(same.error());
    }
    return std::optional<Json>(std::move(*object));
  }

  Result<Json> List(const ResourceType& type, std::string_view ns,
                    const ListOptions& options) override {
    Json items = Json::array();
    std::string resource_version;
    auto listed = Paged(type, ns, options, kMaxListBytes, resource_version, [&](Json& page) {
      for (Json& item : page) {
        items.push_back(std::move(item));
      }
      return Status{};
    });
    if (!listed) {
      return Fail(listed.error());
    }
    return Json{{"items", std::move(items)}, {"metadata", {{"resourceVersion", resource_version}}}};
  }

  Status ListPages(const ResourceType& type, std::string_view ns, const ListOptions& options,
                   const std::function<Status(Json& items)>& on_page) override {
    std::string resource_version;
    return Paged(type, ns, options, 0, resource_version, on_page);
  }

  Result<std::string> ListPagesAt(const ResourceType& type, std::string_view ns,
                                  const ListOptions& options,
                                  const std::function<Status(Json& items)>& on_page) override {
    std::string resource_version;
    if (auto listed = Paged(type, ns, options, 0, resource_version, on_page); !listed) {
      return Fail(listed.error());
    }
    return resource_version;
  }

  Result<Json> Create(const ResourceType& type, std::string_view ns, const Json& object) override {
    const std::string describe_as = Describe("create", type, ns, "");
    auto name = OptionalString(object, "/metadata/name", describe_as);
    auto object_ns = OptionalString(object, "/metadata/namespace", describe_as);
    if (!name || !object_ns) {
      return Fail(ErrorCode::kInvalidArgument,
                  (!name ? name.error() : object_ns.error()).message());
    }
    const std::string target_ns = ns.empty() ? object_ns->value_or("") : std::string(ns);
    const std::string what = Describe("create", type, target_ns, name->value_or(""));
    if (type.namespaced && target_ns.empty()) {
      return Fail(ErrorCode::kInvalidArgument, what + ": no namespace given");
    }
    // The server refuses a create that carries a resourceVersion (500, not retried).
    Json body = object;
    if (body.is_object() && body.contains("metadata") && body["metadata"].is_object()) {
      body["metadata"].erase("resourceVersion");
    }
    // A repeated create answers AlreadyExists, which callers handle by re-reading.
    return SendObject("POST", CollectionPath(type, target_ns), body, kJson, Safety::kRepeatable,
                      type, target_ns, name->value_or(""), what);
  }

  Result<Json> Update(const ResourceType& type, std::string_view ns, std::string_view name,
                      const Json& object) override {
    const std::string what = Describe("update", type, ns, name);
    auto path = ItemPath(type, ns, name, what);
    if (!path) {
      return Fail(path.error());
    }
    auto body_name = OptionalString(object, "/metadata/name", what);
    auto version = OptionalString(object, "/metadata/resourceVersion", what);
    if (!body_name || !version) {
      return Fail(ErrorCode::kInvalidArgument,
                  (!body_name ? body_name.error() : version.error()).message());
    }
    if (body_name->has_value() && **body_name != name) {
      return Fail(ErrorCode::kInvalidArgument, what + ": the object is named \"" + **body_name +
                                                   "\", not \"" + std::string(name) + "\"");
    }
    // Only a conditional update may run twice: the second answers Conflict.
    const Safety safety = version->value_or("").empty() ? Safety::kOnce : Safety::kRepeatable;
    return SendObject("PUT", *path, object, kJson, safety, type, ns, name, what);
  }

  Result<Json> Patch(const ResourceType& type, std::string_view ns, std::string_view name,
                     PatchType patch_type, const Json& patch) override {
    const std::string what = Describe("patch", type, ns, name);
    auto path = ItemPath(type, ns, name, what);
    if (!path) {
      return Fail(path.error());
    }
    const Safety safety =
        IsGuardedJsonPatch(patch_type, patch) ? Safety::kRepeatable : Safety::kOnce;
    return SendObject("PATCH", *path, patch, PatchMediaType(patch_type), safety, type, ns, name,
                      what);
  }

  Status Delete(const ResourceType& type, std::string_view ns, std::string_view name) override {
    const std::string what = Describe("delete", type, ns, name);
    auto path = ItemPath(type, ns, name, what);
    if (!path) {
      return Fail(path.error());
    }
    auto response = Execute(NewRequest("DELETE", *path), Safety::kOnce, what);
    if (!response) {
      return Fail(response.error());
    }
    if (!IsSuccess(response->status)) {
      return Fail(ErrorFromResponse(*response, what));
    }
    return {};
  }

  void WakeWatches() override { transport_->WakeStreams(); }

  Status Watch(const ResourceType& type, std::string_view ns, const WatchOptions& options,
               const std::function<bool(const WatchEvent&)>& on_event,
               const std::function<bool()>& cancelled) override {
    const std::string what = Describe("watch", type, ns, "");
    Query query;
    query.Add("watch", "1").AddIfSet("resourceVersion", options.resource_version);
    if (options.allow_bookmarks) {
      query.Add("allowWatchBookmarks", "true");
    }
    if (options.server_timeout.count() > 0) {
      query.Add("timeoutSeconds", std::to_string(options.server_timeout.count()));
    }
    query.AddIfSet("labelSelector", options.label_selector)
        .AddIfSet("fieldSelector", options.field_selector);
    HttpRequest request = NewRequest("GET", CollectionPath(type, ns) + query.str());
    request.timeout = options.server_timeout.count() > 0
                          ? std::chrono::milliseconds(options.server_timeout + kWatchTimeoutMargin)
                          : std::chrono::milliseconds(0);

    auto is_cancelled = [&cancelled] { return cancelled && cancelled(); };
    if (is_cancelled()) {
      return {};
    }
    WatchDecoder decoder;
    std::vector<WatchEvent> events;
    std::optional<Error> failure;
    bool malformed = false;
    bool stopped = false;
    // Returns false to end the stream: the caller is done, or the stream is broken. Events
    // decoded before a bad line are still delivered.
    auto deliver = [&](std::string_view chunk) {
      events.clear();
      if (auto fed = decoder.Feed(chunk, events); !fed) {
        failure = fed.error().Wrap(what);
        malformed = true;
      }
      for (const WatchEvent& event : events) {
        if (event.type == WatchEventType::kError) {
          failure = ErrorFromStatus(event.object, what);
          return false;
        }
        if (!on_event(event)) {
          stopped = true;
          return false;
        }
      }
      return !malformed;
    };
    auto response =
        Execute(std::move(request), Safety::kOnce, what, [&](const HttpRequest& attempt) {
          return transport_->Stream(attempt, deliver, cancelled);
        });
    if (failure) {
      return Fail(*failure);
    }
    if (stopped || is_cancelled()) {
      return {};
    }
    if (!response) {
      return Fail(response.error());
    }
    if (!IsSuccess(response->status)) {
      return Fail(ErrorFromResponse(*response, what));
    }
    // The server closed the stream. A last line without its newline is still an event; a
    // fragment that does not parse means the stream broke mid-event.
    if (decoder.pending() > 0) {
      static_cast<void>(deliver("\n"));
      if (malformed) {
        return Fail(ErrorCode::kUnavailable, what + ": the stream ended in the middle of an event");
      }
      if (failure) {
        return Fail(*failure);
      }
    }
    return {};
  }

 private:
  // Follows continue tokens to the end, handing each page's items to `on_page`; with
  // `max_bytes`, a list whose pages add up to more is refused.
  Status Paged(const ResourceType& type, std::string_view ns, const ListOptions& options,
               std::size_t max_bytes, std::string& resource_version,
               const std::function<Status(Json& items)>& on_page) {
    const std::string what = Describe("list", type, ns, "");
    std::string continue_token;
    std::set<std::string> seen_tokens;
    std::size_t bytes = 0;
    for (int page = 0;; ++page) {
      if (page == kMaxListPages) {
        return Fail(ErrorCode::kBadResponse, what + ": the server kept sending continue tokens " +
                                                 "after " + std::to_string(kMaxListPages) +
                                                 " pages");
      }
      Query query;
      if (options.page_size > 0) {
        query.Add("limit", std::to_string(options.page_size));
      }
      query.AddIfSet("continue", continue_token)
          .AddIfSet("labelSelector", options.label_selector)
          .AddIfSet("fieldSelector", options.field_selector);
      auto response = Execute(NewRequest("GET", CollectionPath(type, ns) + query.str()),
                              Safety::kRepeatable, what);
      if (!response) {
        return Fail(response.error());
      }
      if (!IsSuccess(response->status)) {
        return Fail(ErrorFromResponse(*response, what));
      }
      bytes += response->body.size();
      if (max_bytes > 0 && bytes > max_bytes) {
        return Fail(ErrorCode::kBadResponse, what + ": the list is larger than " +
                                                 std::to_string(max_bytes / (1024 * 1024)) +
                                                 " MiB");
      }
      auto page_object = DecodeObject(*response, what);
      if (!page_object) {
        return Fail(page_object.error());
      }
      auto page_items = OptionalArray(*page_object, "/items", what);
      if (!page_items) {
        return Fail(page_items.error());
      }
      Json items = Json::array();
      if (*page_items != nullptr) {
        for (const Json& item : **page_items) {
          if (!item.is_object()) {
            return Fail(ErrorCode::kBadResponse, what + ": an item of the list is not an object");
          }
        }
        items = std::move((*page_object)["items"]);
      }
      auto version = OptionalString(*page_object, "/metadata/resourceVersion", what);
      auto next = OptionalString(*page_object, "/metadata/continue", what);
      if (!version || !next) {
        return Fail(!version ? version.error() : next.error());
      }
      if (resource_version.empty()) {
        resource_version = version->value_or("");
      }
      if (auto taken = on_page(items); !taken) {
        return taken;
      }
      continue_token = next->value_or("");
      if (continue_token.empty()) {
        break;
      }
      // A token seen before would page through the same results again, forever.
      if (!seen_tokens.insert(continue_token).second) {
        return Fail(ErrorCode::kBadResponse,
                    what + ": the server repeated a continue token it had sent before");
      }
    }
    return {};
  }

  // Whether a request may be sent again after a transient failure (see Client).
  enum class Safety {
    kRepeatable,  // reads and guarded writes: retried after any transient failure
    kOnce,        // retried only after a 429, which the server sends before acting
  };
  using Sender = std::function<Result<HttpResponse>(const HttpRequest&)>;

  std::string GroupVersionPath(const ResourceType& type) const {
    std::string path = config_.server;
    if (type.group.empty()) {
      path += "/api/";
    } else {
      path += "/apis/";
      path += type.group;
      path += '/';
    }
    path += type.version;
    return path;
  }

  std::string CollectionPath(const ResourceType& type, std::string_view ns) const {
    std::string path = GroupVersionPath(type);
    if (type.namespaced && !ns.empty()) {
      path += "/namespaces/";
      path += PercentEncode(ns);
    }
    path += '/';
    path += type.resource;
    return path;
  }

  Result<std::string> ItemPath(const ResourceType& type, std::string_view ns, std::string_view name,
                               const std::string& what) const {
    if (name.empty()) {
      return Fail(ErrorCode::kInvalidArgument, what + ": no name given");
    }
    if (type.namespaced && ns.empty()) {
      return Fail(ErrorCode::kInvalidArgument, what + ": no namespace given");
    }
    return CollectionPath(type, ns) + "/" + PercentEncode(name);
  }

  // "get secrets infra/webhook-server-cert", "list validatingwebhookconfigurations".
  static std::string Describe(std::string_view verb, const ResourceType& type, std::string_view ns,
                              std::string_view name) {
    std::string what(verb);
    what += ' ';
    what += type.resource;
    if (!type.namespaced) {
      ns = {};
    }
    if (!name.empty()) {
      what += ' ';
      if (!ns.empty()) {
        what += ns;
        what += '/';
      }
      what += name;
    } else if (!ns.empty()) {
      what += " in namespace ";
      what += ns;
    }
    return what;
  }

  HttpRequest NewRequest(std::string method, std::string url) const {
    HttpRequest request;
    request.method = std::move(method);
    request.url = std::move(url);
    request.headers = {{"Accept", kJson}, {"User-Agent", user_agent_}};
    request.timeout = options_.request_timeout;
    return request;
  }

  Result<Json> SendObject(std::string method, std::string url, const Json& object,
                          std::string_view content_type, Safety safety, const ResourceType& type,
                          std::string_view ns, std::string_view name, const std::string& what) {
    auto body = Serialize(object, what);
    if (!body) {
      return Fail(body.error());
    }
    if (!options_.field_manager.empty()) {
      url += "?fieldManager=" + PercentEncode(options_.field_manager);
    }
    HttpRequest request = NewRequest(std::move(method), std::move(url));
    request.headers.emplace_back("Content-Type", std::string(content_type));
    request.body = std::move(*body);
    auto response = Execute(std::move(request), safety, what);
    if (!response) {
      return Fail(response.error());
    }
    if (!IsSuccess(response->status)) {
      return Fail(ErrorFromResponse(*response, what));
    }
    auto written = DecodeObject(*response, what);
    if (!written) {
      return Fail(written.error());
    }
    if (!name.empty()) {
      if (auto same = ExpectIdentity(*written, type, ns, name, what); !same) {
        return Fail(same.error());
      }
    }
    return written;
  }

  std::chrono::milliseconds Backoff(int retry) {
    const RetryOptions& retry_options = options_.retry;
    auto delay = retry_options.backoff_base * (1LL << std::min(retry, 16));
    delay = std::min<std::chrono::milliseconds>(delay, retry_options.backoff_cap);
    std::lock_guard<std::mutex> lock(random_mutex_);
    std::uniform_int_distribution<long> jitter(0, delay.count() / 2);
    return delay + std::chrono::milliseconds(jitter(random_));
  }

  Result<HttpResponse> Execute(HttpRequest request, Safety safety, const std::string& what) {
    return Execute(std::move(request), safety, what,
                   [this](const HttpRequest& attempt) { return transport_->Send(attempt); });
  }

  // Sends, riding out transient failures as RetryOptions say, and returns the last answer
  // whatever its status:
  // - transport failures that may pass (kUnavailable), 5xx and 429: wait and retry, if the
  //   request is repeatable (a kOnce request only after a 429);
  // - the wait is the server's Retry-After (at most max_retry_after) or the backoff, and never
  //   reaches past the deadline;
  // - 401 with a token that can change: re-read it and retry once.
  // TLS verification failures, other 4xx and unusable answers return at once.
  Result<HttpResponse> Execute(HttpRequest request, Safety safety, const std::string& what,
                               const Sender& send) {
    const RetryOptions& retry_options = options_.retry;
    const TimePoint started = clock_.Now();
    int retries = 0;
    bool reauthenticated = false;
    while (true) {
      limiter_.Acquire();
      auto token = tokens_.Token();
      if (!token) {
        return Fail(token.error().Wrap(what));
      }
      HttpRequest attempt = request;
      if (!token->empty()) {
        attempt.headers.emplace_back("Authorization", "Bearer " + *token);
      }
      auto response = send(attempt);
      if (options_.on_response) {
        options_.on_response(attempt.method, response ? response->status : 0);
      }
      std::string problem;
      std::optional<std::chrono::seconds> asked;
      if (!response) {
        if (response.error().code() != ErrorCode::kUnavailable || safety != Safety::kRepeatable) {
          return Fail(response.error().Wrap(what));
        }
        problem = response.error().message();
      } else {
        const int status = response->status;
        if (status == 401 && !reauthenticated && tokens_.Invalidate()) {
          reauthenticated = true;
          continue;
        }
        const bool transient = status == 429 || status >= 500;
        if (!transient || (safety != Safety::kRepeatable && status != 429)) {
          return response;
        }
        const Error error = ErrorFromResponse(*response, "");
        asked = error.retry_after();
        problem = "HTTP " + std::to_string(status) + " (" + error.message() + ")";
      }

      const bool out_of_retries =
          retry_options.max_retries >= 0 && retries >= retry_options.max_retries;
      const TimePoint now = clock_.Now();
      const bool out_of_time = retry_options.deadline && now >= *retry_options.deadline;
      if (out_of_retries || out_of_time) {
        if (!response) {
          if (retries == 0) {
            return Fail(response.error().Wrap(what));
          }
          const auto took =
              std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now() - started);
          return Fail(Error(response.error().code(), response.error().message() + " (" +
                                                         std::to_string(retries + 1) +
                                                         " attempts in " + FormatWait(took) + ")")
                          .Wrap(what));
        }
        return response;
      }
      std::chrono::milliseconds wait = Backoff(retries);
      std::string why;
      if (asked) {
        wait = std::min<std::chrono::milliseconds>(*asked, retry_options.max_retry_after);
        why = " (the server asked for Retry-After " + std::to_string(asked->count()) + "s";
        why += *asked > retry_options.max_retry_after
                   ? ", honoured for at most " + FormatWait(retry_options.max_retry_after) + ")"
                   : ")";
      }
      if (retry_options.deadline) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(*retry_options.deadline - now);
        if (left < wait) {
          wait = left;
          why += " (the last try before the deadline)";
        }
      }
      ++retries;
      if (retry_options.on_retry) {
        retry_options.on_retry(what + ": " + problem + "; retrying in " + FormatWait(wait) + why);
      }
      clock_.Sleep(wait);
    }
  }

  const ClusterConfig config_;
  const std::unique_ptr<HttpTransport> transport_;
  const ClientOptions options_;
  const Clock& clock_;
  RateLimiter limiter_;
  TokenSource tokens_;
  const std::string user_agent_;
  std::mutex random_mutex_;
  std::mt19937 random_;
};

}  // namespace

Result<std::unique_ptr<Client>> MakeRestClient(const ClusterConfig& config,
                                               std::unique_ptr<HttpTransport> transport,
                                               const ClientOptions& options, const Clock& clock) {
  if (!transport) {
    return Fail(ErrorCode::kInvalidArgument, "REST client: no HTTP transport");
  }
  if (config.server.rfind("https://", 0) != 0 && config.server.rfind("http://", 0) != 0) {
    return Fail(ErrorCode::kInvalidArgument,
                "REST client: server \"" + config.server + "\" is not an http(s) URL");
  }
  ClusterConfig normalized = config;
  while (!normalized.server.empty() && normalized.server.back() == '/') {
    normalized.server.pop_back();
  }
  return std::unique_ptr<Client>(
      std::make_unique<RestClient>(std::move(normalized), std::move(transport), options, clock));
}

}  // namespace certctl::kube
