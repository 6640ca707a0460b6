#pragma once

// From a parsed request head to the bytes of its response. Internal to the endpoints module.

#include <string>

#include "certctl/endpoints/server.h"

#include "endpoints/http_request.h"

namespace certctl::endpoints {

struct Reply {
  std::string bytes;   // status line, header fields, body
  bool close = false;  // the connection ends once these bytes are sent
};

// GET and HEAD of a route run its handler; any other method is 405 with an Allow field, a
// GET or HEAD with a body 413, an unknown path 404. A request with a body is answered and
// the connection closed: the body is never read.
Reply Dispatch(const RequestHead& request, const Routes& routes);

// The answer to a head that did not parse (400, 431, 505); the connection closes after it.
Reply Refuse(ParseState state);

}  // namespace certctl::endpoints
