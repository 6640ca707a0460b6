#include <mutex>
#include <random>
#include <string>
#include <utility>

#include "certctl/kube/client.h"
#include "certctl/kube/watch_decoder.h"
#include "certctl/util/version.h"

#include "kube/errors.h"
#include "kube/rate_limiter.h"
#include "kube/token_source.h"

namespace certctl::kube {
namespace {

// Reads (GET, LIST) that fail at the transport or get a 5xx without Retry-After are retried
// this many times, after a capped exponential backoff with jitter.
constexpr int kReadRetries = 4;
constexpr std::chrono::milliseconds kReadBackoffBase{250};
constexpr std::chrono::milliseconds kReadBackoffCap{4000};
// A watch that outlives the timeout it asked the server for by this much is presumed dead.
constexpr std::chrono::seconds kWatchTimeoutMargin{60};

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
    return Fail(ErrorCode::kInternal, std::string(what) + ": the server answered HTTP " +
                                          std::to_string(response.status) +
                                          " with a body that is not a JSON object");
  }
  return body;
}

// metadata.<field> of `object` when it is a string, else empty.
std::string MetadataString(const Json& object, const char* field) {
  if (!object.is_object()) {
    return {};
  }
  const auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) {
    return {};
  }
  const auto value = metadata->find(field);
  return value != metadata->end() && value->is_string() ? value->get<std::string>() : std::string();
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
    auto response = Execute(NewRequest("GET", *path), Idempotency::kRead, what);
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
    return std::optional<Json>(std::move(*object));
  }

  Result<Json> List(const ResourceType& type, std::string_view ns,
                    const ListOptions& options) override {
    const std::string what = Describe("list", type, ns, "");
    Json items = Json::array();
    std::string resource_version;
    std::string continue_token;
    do {
      Query query;
      if (options.page_size > 0) {
        query.Add("limit", std::to_string(options.page_size));
      }
      query.AddIfSet("continue", continue_token)
          .AddIfSet("labelSelector", options.label_selector)
          .AddIfSet("fieldSelector", options.field_selector);
      auto response = Execute(NewRequest("GET", CollectionPath(type, ns) + query.str()),
                              Idempotency::kRead, what);
      if (!response) {
        return Fail(response.error());
      }
      if (!IsSuccess(response->status)) {
        return Fail(ErrorFromResponse(*response, what));
      }
      auto page = DecodeObject(*response, what);
      if (!page) {
        return Fail(page.error());
      }
      Json& page_items = (*page)["items"];
      if (page_items.is_array()) {
        for (Json& item : page_items) {
          items.push_back(std::move(item));
        }
      } else if (!page_items.is_null()) {
        return Fail(ErrorCode::kInternal, what + ": the list's items is not an array");
      }
      const Json& metadata = (*page)["metadata"];
      std::string next;
      if (metadata.is_object()) {
        if (resource_version.empty() && metadata.contains("resourceVersion") &&
            metadata["resourceVersion"].is_string()) {
          resource_version = metadata["resourceVersion"].get<std::string>();
        }
        if (metadata.contains("continue") && metadata["continue"].is_string()) {
          next = metadata["continue"].get<std::string>();
        }
      }
      if (!next.empty() && next == continue_token) {
        return Fail(ErrorCode::kInternal, what + ": the server repeated a continue token");
      }
      continue_token = std::move(next);
    } while (!continue_token.empty());
    return Json{{"items", std::move(items)}, {"metadata", {{"resourceVersion", resource_version}}}};
  }

  Result<Json> Create(const ResourceType& type, std::string_view ns, const Json& object) override {
    const std::string name = MetadataString(object, "name");
    const std::string object_ns =
        ns.empty() ? MetadataString(object, "namespace") : std::string(ns);
    const std::string what = Describe("create", type, object_ns, name);
    if (type.namespaced && object_ns.empty()) {
      return Fail(ErrorCode::kInvalidArgument, what + ": no namespace given");
    }
    // The server refuses a create that carries a resourceVersion (500, not retried).
    Json body = object;
    if (body.is_object() && body.contains("metadata") && body["metadata"].is_object()) {
      body["metadata"].erase("resourceVersion");
    }
    return SendObject("POST", CollectionPath(type, object_ns), body, kJson, what);
  }

  Result<Json> Update(const ResourceType& type, std::string_view ns, const Json& object) override {
    const std::string name = MetadataString(object, "name");
    const std::string object_ns =
        ns.empty() ? MetadataString(object, "namespace") : std::string(ns);
    const std::string what = Describe("update", type, object_ns, name);
    if (name.empty()) {
      return Fail(ErrorCode::kInvalidArgument, what + ": the object has no metadata.name");
    }
    auto path = ItemPath(type, object_ns, name, what);
    if (!path) {
      return Fail(path.error());
    }
    return SendObject("PUT", *path, object, kJson, what);
  }

  Result<Json> Patch(const ResourceType& type, std::string_view ns, std::string_view name,
                     PatchType patch_type, const Json& patch) override {
    const std::string what = Describe("patch", type, ns, name);
    auto path = ItemPath(type, ns, name, what);
    if (!path) {
      return Fail(path.error());
    }
    return SendObject("PATCH", *path, patch, PatchMediaType(patch_type), what);
  }

  Status Delete(const ResourceType& type, std::string_view ns, std::string_view name) override {
    const std::string what = Describe("delete", type, ns, name);
    auto path = ItemPath(type, ns, name, what);
    if (!path) {
      return Fail(path.error());
    }
    auto response = Execute(NewRequest("DELETE", *path), Idempotency::kWrite, what);
    if (!response) {
      return Fail(response.error());
    }
    if (!IsSuccess(response->status)) {
      return Fail(ErrorFromResponse(*response, what));
    }
    return {};
  }

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
        Execute(std::move(request), Idempotency::kWrite, what, [&](const HttpRequest& attempt) {
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
  enum class Idempotency { kRead, kWrite };
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
                          std::string_view content_type, const std::string& what) {
    auto body = Serialize(object, what);
    if (!body) {
      return Fail(body.error());
    }
    HttpRequest request = NewRequest(std::move(method), std::move(url));
    request.headers.emplace_back("Content-Type", std::string(content_type));
    request.body = std::move(*body);
    auto response = Execute(std::move(request), Idempotency::kWrite, what);
    if (!response) {
      return Fail(response.error());
    }
    if (!IsSuccess(response->status)) {
      return Fail(ErrorFromResponse(*response, what));
    }
    return DecodeObject(*response, what);
  }

  std::chrono::milliseconds ReadBackoff(int retry) {
    auto delay = kReadBackoffBase * (1 << std::min(retry, 10));
    delay = std::min(delay, kReadBackoffCap);
    std::lock_guard<std::mutex> lock(random_mutex_);
    std::uniform_int_distribution<long> jitter(0, delay.count() / 2);
    return delay + std::chrono::milliseconds(jitter(random_));
  }

  Result<HttpResponse> Execute(HttpRequest request, Idempotency idempotency,
                               const std::string& what) {
    return Execute(std::move(request), idempotency, what,
                   [this](const HttpRequest& attempt) { return transport_->Send(attempt); });
  }

  // Sends with client-go's retry rules and returns the last answer, whatever its status:
  // - 429 or 5xx with an integer Retry-After: sleep that long and retry, up to max_retries,
  //   for any verb;
  // - reads: transport failures and 5xx without Retry-After retried kReadRetries times;
  // - 401 with a token that can change: re-read it and retry once.
  Result<HttpResponse> Execute(HttpRequest request, Idempotency idempotency,
                               const std::string& what, const Sender& send) {
    const bool read = idempotency == Idempotency::kRead;
    int retry_after_retries = 0;
    int read_retries = 0;
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
      if (!response) {
        if (read && read_retries < kReadRetries) {
          clock_.Sleep(ReadBackoff(read_retries++));
          continue;
        }
        return Fail(response.error().Wrap(what));
      }
      const int status = response->status;
      if (status == 401 && !reauthenticated && tokens_.Invalidate()) {
        reauthenticated = true;
        continue;
      }
      if (status == 429 || status >= 500) {
        if (const auto delay = RetryAfterHeader(*response)) {
          if (retry_after_retries < options_.max_retries) {
            ++retry_after_retries;
            clock_.Sleep(std::chrono::duration_cast<std::chrono::milliseconds>(*delay));
            continue;
          }
        } else if (read && status >= 500 && read_retries < kReadRetries) {
          clock_.Sleep(ReadBackoff(read_retries++));
          continue;
        }
      }
      return response;
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
