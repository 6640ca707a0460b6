#pragma once

#include <algorithm>
#include <cctype>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "certctl/kube/transport.h"
#include "certctl/util/result.h"

namespace certctl::testing {

// One answer of the fake API server: a response, or a transport failure.
struct FakeReply {
  int status = 200;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  // For Stream: a 2xx body delivered in these pieces (body is used when this is empty).
  std::vector<std::string> chunks;
  std::optional<Error> failure;

  static FakeReply Json(int status, const nlohmann::json& body) {
    FakeReply reply;
    reply.status = status;
    reply.headers["content-type"] = "application/json";
    reply.body = body.dump() + "\n";
    return reply;
  }
  // A metav1.Status error body, as the API server writes it.
  static FakeReply Status(int status, std::string reason, std::string message) {
    return Json(status, {{"kind", "Status"},
                         {"apiVersion", "v1"},
                         {"metadata", nlohmann::json::object()},
                         {"status", "Failure"},
                         {"message", std::move(message)},
                         {"reason", std::move(reason)},
                         {"code", status}});
  }
  static FakeReply Text(int status, std::string body) {
    FakeReply reply;
    reply.status = status;
    reply.headers["content-type"] = "text/plain; charset=utf-8";
    reply.body = std::move(body);
    return reply;
  }
  // A watch stream: one line per event.
  static FakeReply Events(const std::vector<nlohmann::json>& events) {
    FakeReply reply;
    reply.headers["content-type"] = "application/json";
    for (const auto& event : events) {
      reply.chunks.push_back(event.dump() + "\n");
    }
    return reply;
  }
  // A transport failure; kUnavailable is what refused, reset and timed-out connections give.
  static FakeReply Failure(std::string message, ErrorCode code = ErrorCode::kUnavailable) {
    FakeReply reply;
    reply.status = 0;
    reply.failure = Error(code, std::move(message));
    return reply;
  }
  FakeReply& WithHeader(const std::string& name, std::string value) {
    headers[name] = std::move(value);
    return *this;
  }
};

// An in-memory API server end of the HttpTransport seam. Answers come from per-route scripts
// ("GET /api/v1/namespaces/ns/secrets/x": taken in order, the last one repeating) or else
// from a handler; unknown routes get the API server's generic 404. Every request is
// recorded, so tests can check what went over the wire. Thread-safe.
class FakeTransport {
 public:
  using Handler = std::function<FakeReply(const kube::HttpRequest&)>;

  // Scripts `method` + `path` (no scheme, host or query).
  void Script(const std::string& method, const std::string& path, std::vector<FakeReply> replies) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& queue = scripts_[method + " " + path];
    queue.insert(queue.end(), replies.begin(), replies.end());
  }
  void SetHandler(Handler handler) {
    std::lock_guard<std::mutex> lock(mutex_);
    handler_ = std::move(handler);
  }

  // A transport for the code under test; `this` must outlive it.
  std::unique_ptr<kube::HttpTransport> NewTransport() { return std::make_unique<Endpoint>(*this); }

  std::vector<kube::HttpRequest> requests() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }
  std::size_t CountRequests(const std::string& method, const std::string& path) const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t count = 0;
    for (const auto& request : requests_) {
      count += request.method == method && PathOf(request.url) == path ? 1 : 0;
    }
    return count;
  }

  // The path of an absolute URL, without the query.
  static std::string PathOf(const std::string& url) {
    const auto scheme = url.find("://");
    const auto start = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
    if (start == std::string::npos) {
      return "/";
    }
    return url.substr(start, url.find('?', start) - start);
  }
  // The raw (still percent-encoded) value of query parameter `name`, if present.
  static std::optional<std::string> QueryParam(const std::string& url, const std::string& name) {
    const auto question = url.find('?');
    if (question == std::string::npos) {
      return std::nullopt;
    }
    std::size_t start = question + 1;
    while (start <= url.size()) {
      const auto end = std::min(url.find('&', start), url.size());
      const std::string pair = url.substr(start, end - start);
      const auto equals = pair.find('=');
      if (pair.substr(0, equals) == name) {
        return equals == std::string::npos ? std::string() : pair.substr(equals + 1);
      }
      start = end + 1;
    }
    return std::nullopt;
  }
  static std::optional<std::string> Header(const kube::HttpRequest& request,
                                           const std::string& name) {
    for (const auto& [header, value] : request.headers) {
      if (header.size() == name.size() &&
          std::equal(header.begin(), header.end(), name.begin(), [](char a, char b) {
            return std::tolower(static_cast<unsigned char>(a)) ==
                   std::tolower(static_cast<unsigned char>(b));
          })) {
        return value;
      }
    }
    return std::nullopt;
  }

 private:
  class Endpoint final : public kube::HttpTransport {
   public:
    explicit Endpoint(FakeTransport& server) : server_(server) {}
    Result<kube::HttpResponse> Send(const kube::HttpRequest& request) override {
      FakeReply reply = server_.Answer(request);
      if (reply.failure) {
        return Fail(*reply.failure);
      }
      return kube::HttpResponse{reply.status, reply.headers, reply.body};
    }
    Result<kube::HttpResponse> Stream(const kube::HttpRequest& request,
                                      const kube::BodyChunkHandler& on_chunk,
                                      const std::function<bool()>& cancelled) override {
      FakeReply reply = server_.Answer(request);
      if (reply.failure) {
        return Fail(*reply.failure);
      }
      if (reply.status < 200 || reply.status >= 300) {
        return kube::HttpResponse{reply.status, reply.headers, reply.body};
      }
      if (reply.chunks.empty() && !reply.body.empty()) {
        reply.chunks.push_back(reply.body);
      }
      for (const std::string& chunk : reply.chunks) {
        if ((cancelled && cancelled()) || !on_chunk(chunk)) {
          break;
        }
      }
      return kube::HttpResponse{reply.status, reply.headers, ""};
    }

   private:
    FakeTransport& server_;
  };

  FakeReply Answer(const kube::HttpRequest& request) {
    Handler handler;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      requests_.push_back(request);
      auto script = scripts_.find(request.method + " " + PathOf(request.url));
      if (script != scripts_.end() && !script->second.empty()) {
        FakeReply reply = script->second.front();
        if (script->second.size() > 1) {
          script->second.pop_front();
        }
        return reply;
      }
      handler = handler_;
    }
    if (handler) {
      return handler(request);
    }
    return FakeReply::Status(404, "NotFound", "the server could not find the requested resource");
  }

  mutable std::mutex mutex_;
  std::map<std::string, std::deque<FakeReply>> scripts_;
  Handler handler_;
  std::vector<kube::HttpRequest> requests_;
};

}  // namespace certctl::testing
