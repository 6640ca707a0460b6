#include "certctl/util/host_port.h"

#include <charconv>

namespace certctl {
namespace {

tl::unexpected<Error> BadAddress(std::string_view what, std::string_view text,
                                 std::string_view why) {
  return Fail(ErrorCode::kInvalidArgument, "invalid " + std::string(what) + " \"" +
                                               std::string(text) + "\": " + std::string(why));
}

}  // namespace

Result<HostPort> ParseHostPort(std::string_view text, std::string_view what) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    return BadAddress(what, text, "expected HOST:PORT or :PORT");
  }
  std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return BadAddress(what, text, "an IPv6 host goes in brackets, like [::1]:8081");
  }
  int port = -1;
  const auto parsed = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || parsed.ec != std::errc() ||
      parsed.ptr != port_text.data() + port_text.size() || port < 0 || port > 65535) {
    return BadAddress(what, text, "the port must be a number from 0 to 65535");
  }
  return HostPort{std::string(host), port};
}

std::string FormatHostPort(const HostPort& address) {
  const bool ipv6 = address.host.find(':') != std::string::npos;
  return (ipv6 ? "[" + address.host + "]" : address.host) + ":" + std::to_string(address.port);
}

}  // namespace certctl
