#pragma once

#include <chrono>
#include <string>

#include "certctl/util/host_port.h"
#include "certctl/util/result.h"

namespace certctl::probe {

// What the API server does before it calls a webhook, done from inside the pod: connect to
// `address` (the webhook's own listener), send `server_name` as SNI, and complete a TLS
// handshake that trusts only the certificates in `bundle_pem` (a caBundle as read from a
// target; no system roots) and requires the served certificate to be valid for
// `server_name` ("<service>.<namespace>.svc").
//
// Errors name the address and say what failed:
//  - kUnavailable: no connection (refused, unreachable, timed out) or the peer closed it;
//  - kFailedPrecondition: the certificate does not verify against the bundle or is not for
//    `server_name`, with OpenSSL's reason ("unable to get local issuer certificate", ...);
//  - kInvalidArgument: `bundle_pem` holds no certificate.
// `timeout` bounds the whole exchange (name lookup excepted: use a numeric host).
Status VerifyHandshake(const HostPort& address, const std::string& server_name,
                       const std::string& bundle_pem, std::chrono::milliseconds timeout);

// The same handshake, and what it saw beyond the verdict, for a report about it.
struct HandshakeOutcome {
  Status status;  // as VerifyHandshake returns it
  // The served chain verifies against the bundle but is not valid for `server_name`.
  bool name_not_covered = false;
  // The certificate the peer served, as PEM, when the handshake completed.
  std::string served_leaf_pem;
};
HandshakeOutcome DialAsApiServer(const HostPort& address, const std::string& server_name,
                                 const std::string& bundle_pem, std::chrono::milliseconds timeout);

}  // namespace certctl::probe
