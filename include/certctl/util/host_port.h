#pragma once

#include <string>
#include <string_view>

#include "certctl/util/result.h"

namespace certctl {

// "127.0.0.1:8081", "[::1]:8081", "localhost:9443", ":8081" (no host).
struct HostPort {
  std::string host;  // without brackets; may be empty
  int port = 0;
};

// kInvalidArgument naming `what` ("listen address", "serving address"), the text and what is
// wrong with it: no colon, an IPv6 host without brackets, a port outside 0-65535.
Result<HostPort> ParseHostPort(std::string_view text, std::string_view what);

// The address as text again, an IPv6 host in brackets.
std::string FormatHostPort(const HostPort& address);

}  // namespace certctl
