#include "endpoints/dispatch.h"

#include <exception>
#include <string_view>

namespace certctl::endpoints {
namespace {

constexpr std::string_view kPlainText = "text/plain; charset=utf-8";

std::string_view Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 413:
      return "Content Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return status < 400 ? "OK" : "Error";
  }
}

struct ReplyOptions {
  bool head_only = false;
  bool close = false;
  bool announce_keep_alive = false;  // an HTTP/1.0 client kept alive is told so
  bool allow = false;
};

Reply Format(const Response& response, const ReplyOptions& options) {
  Reply reply;
  reply.close = options.close;
  std::string& out = reply.bytes;
  out.reserve(160 + (options.head_only ? 0 : response.body.size()));
  out += "HTTP/1.1 " + std::to_string(response.status) + " ";
  out += Reason(response.status);
  out += "\r\nContent-Type: ";
  out += response.content_type;
  out += "\r\nContent-Length: " + std::to_string(response.body.size()) + "\r\n";
  out += "Cache-Control: no-store\r\n";
  if (options.allow) {
    out += "Allow: GET, HEAD\r\n";
  }
  if (options.close) {
    out += "Connection: close\r\n";
  } else if (options.announce_keep_alive) {
    out += "Connection: keep-alive\r\n";
  }
  out += "\r\n";
  if (!options.head_only) {
    out += response.body;
  }
  return reply;
}

Response Plain(int status, std::string body) {
  return Response{status, std::move(body), std::string(kPlainText)};
}

}  // namespace

Reply Dispatch(const RequestHead& request, const Routes& routes) {
  const bool is_head = request.method == "HEAD";
  ReplyOptions options;
  options.head_only = is_head;
  // An unread body would be taken for the next request: close after answering.
  options.close = !request.keep_alive || request.has_body;
  options.announce_keep_alive = request.minor_version == 0;
  if (request.method != "GET" && !is_head) {
    options.head_only = false;
    options.allow = true;
    return Format(Plain(405, "method not allowed\n"), options);
  }
  if (request.has_body) {
    return Format(Plain(413, "a request body is not accepted\n"), options);
  }
  const auto route = routes.find(request.path);
  if (route == routes.end()) {
    return Format(Plain(404, "not found\n"), options);
  }
  try {
    return Format(route->second(request.query), options);
  } catch (const std::exception&) {
    return Format(Plain(500, "internal error\n"), options);
  }
}

Reply Refuse(ParseState state) {
  ReplyOptions options;
  options.close = true;
  switch (state) {
    case ParseState::kHeadTooLarge:
      return Format(Plain(431, "request head too large\n"), options);
    case ParseState::kBadVersion:
      return Format(Plain(505, "only HTTP/1.x is served\n"), options);
    default:
      return Format(Plain(400, "bad request\n"), options);
  }
}

}  // namespace certctl::endpoints
