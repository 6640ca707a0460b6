// The endpoints server's request-head parser, on bytes from any client.
// Properties:
//  - a complete head is no longer than the input nor than kMaxRequestHead, and the same
//    bytes alone (without what follows them: a pipelined request) parse to the same head;
//  - an input is incomplete only below the size cap (431 at the cap), and an incomplete one
//    that holds more than blank lines is settled, one way or the other, once a blank line
//    ends it;
//  - the decoded path holds no NUL, and every answer, to a head or to a refusal, is one
//    HTTP/1.1 status line with a Content-Length that matches its body;
//  - percent-encoding every byte of a text and decoding it gives the text back.

#include "endpoints/http_request.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "endpoints/dispatch.h"
#include "fuzz_support.h"

namespace {

using certctl::endpoints::Dispatch;
using certctl::endpoints::kMaxRequestHead;
using certctl::endpoints::ParseOutcome;
using certctl::endpoints::ParseRequestHead;
using certctl::endpoints::ParseState;
using certctl::endpoints::PercentDecode;
using certctl::endpoints::Refuse;
using certctl::endpoints::Reply;
using certctl::endpoints::Response;
using certctl::endpoints::Routes;

void CheckReply(const Reply& reply, bool head_only) {
  const std::string& bytes = reply.bytes;
  FUZZ_CHECK(bytes.rfind("HTTP/1.1 ", 0) == 0);
  const std::size_t end = bytes.find("\r\n\r\n");
  FUZZ_CHECK(end != std::string::npos);
  const std::string_view fields(bytes.data(), end);
  const std::size_t at = fields.find("\r\nContent-Length: ");
  FUZZ_CHECK(at != std::string_view::npos);
  const std::size_t length = std::stoul(std::string(fields.substr(at + 18)));
  FUZZ_CHECK(head_only || bytes.size() - end - 4 == length);
}

void CheckPercentRoundTrip(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string encoded;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    encoded += '%';
    encoded += kHex[byte >> 4];
    encoded += kHex[byte & 0xF];
  }
  std::string decoded;
  const bool ok = PercentDecode(encoded, /*plus_is_space=*/true, decoded);
  FUZZ_CHECK(ok == (text.find('\0') == std::string_view::npos));
  FUZZ_CHECK(!ok || decoded == text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input = certctl::fuzz::AsText(data, size);
  const ParseOutcome outcome = ParseRequestHead(input);
  switch (outcome.state) {
    case ParseState::kComplete: {
      FUZZ_CHECK(outcome.consumed > 0 && outcome.consumed <= input.size());
      FUZZ_CHECK(outcome.consumed <= kMaxRequestHead);
      FUZZ_CHECK(outcome.head.path.find('\0') == std::string::npos);
      const ParseOutcome alone = ParseRequestHead(input.substr(0, outcome.consumed));
      FUZZ_CHECK(alone.state == ParseState::kComplete && alone.consumed == outcome.consumed);
      FUZZ_CHECK(alone.head.path == outcome.head.path && alone.head.query == outcome.head.query);
      Routes routes;
      routes["/healthz"] = [](const auto&) { return Response{200, "ok\n"}; };
      CheckReply(Dispatch(outcome.head, routes), outcome.head.method == "HEAD");
      break;
    }
    case ParseState::kIncomplete:
      FUZZ_CHECK(input.size() < kMaxRequestHead);
      break;
    default:
      CheckReply(Refuse(outcome.state), false);
      break;
  }
  if (outcome.state == ParseState::kIncomplete && input.size() + 4 < kMaxRequestHead &&
      input.find_first_not_of("\r\n") != std::string_view::npos) {
    // A cut-short head never fails for being short; ending it settles it.
    const ParseOutcome ended = ParseRequestHead(std::string(input) + "\r\n\r\n");
    FUZZ_CHECK(ended.state != ParseState::kIncomplete);
  }
  CheckPercentRoundTrip(input.substr(0, 256));
  return 0;
}
