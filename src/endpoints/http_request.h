#pragma once

// The request head of the endpoints server: request line and header fields, parsed from
// untrusted bytes. Internal to the endpoints module (and its tests and fuzz target).

#include <cstddef>
#include <string>
#include <string_view>

#include "certctl/endpoints/server.h"

namespace certctl::endpoints {

// A head larger than this is answered 431: it bounds what one connection may buffer.
inline constexpr std::size_t kMaxRequestHead = 8 * 1024;

struct RequestHead {
  std::string method;
  std::string path;  // percent-decoded, without the query
  Query query;
  int minor_version = 1;  // HTTP/1.<minor>
  bool keep_alive = true;
  bool has_body = false;  // Content-Length above 0, or a Transfer-Encoding
};

enum class ParseState {
  kIncomplete,  // no blank line yet, and still within kMaxRequestHead
  kComplete,
  kBadRequest,    // 400
  kHeadTooLarge,  // 431
  kBadVersion,    // 505: not HTTP/1.x
};

struct ParseOutcome {
  ParseState state = ParseState::kIncomplete;
  std::size_t consumed = 0;  // bytes of the head, blank line included (kComplete only)
  RequestHead head;
};

// Parses the head at the start of `buffer` (which may hold more: a pipelined request).
// Lines end in CRLF or a bare LF.
ParseOutcome ParseRequestHead(std::string_view buffer);

// "a%20b" -> "a b"; with plus_is_space (query strings) "+" is a space too. False on a
// malformed escape or a decoded NUL.
bool PercentDecode(std::string_view text, bool plus_is_space, std::string& out);

// "exclude=serving&exclude=certificate&verbose": verbose="", a name may repeat, empty
// parts are skipped. False on a malformed escape.
bool ParseQuery(std::string_view text, Query& out);

}  // namespace certctl::endpoints
