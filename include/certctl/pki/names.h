#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "certctl/util/result.h"

namespace certctl::pki {

inline constexpr char kDefaultClusterDomain[] = "cluster.local";
// The most --dns-name and --ip names together: a webhook is called by a few names; a
// certificate with hundreds is slow to issue and check, and some TLS clients refuse it.
inline constexpr std::size_t kMaxExtraNames = 100;

// Who the server certificate is for.
struct ServiceIdentity {
  std::string service;  // may be empty when extra_dns_names is not
  std::string namespace_name;
  std::string cluster_domain = kDefaultClusterDomain;
  std::vector<std::string> extra_dns_names;  // --dns-name
  std::vector<std::string> ip_addresses;     // --ip
};

// DNS SANs in contract order: S.N.svc, S, S.N, S.N.svc.<domain>, then the extra names,
// without duplicates.
std::vector<std::string> RequiredDnsNames(const ServiceIdentity& identity);

// kInvalidArgument naming the field when the identity cannot yield a certificate: no
// service and no DNS name, a label that is not RFC 1123, an IP that does not parse, more
// than kMaxExtraNames extra names.
Status ValidateIdentity(const ServiceIdentity& identity);

// Whether a leading "*" label is acceptable in a DNS name.
enum class Wildcard { kReject, kAllow };

// kInvalidArgument with the reason (no field name) when `name` cannot be a DNS SAN: labels
// of letters, digits and '-' (RFC 1123), 1-63 characters each, 253 in all, no trailing dot;
// with Wildcard::kAllow the first label may be exactly "*".
Status ValidateDnsName(std::string_view name, Wildcard wildcard);

// kInvalidArgument with the reason when `text` is not a textual IPv4 or IPv6 address.
Status ValidateIpAddress(std::string_view text);

// Whether a certificate with these SANs passes the host name check of Go's TLS client, the
// one the API server makes when it calls a webhook (RFC 6125): an IP host (IPv6 possibly in
// brackets) matches an equal IP SAN only; a DNS host matches a DNS SAN case-insensitively,
// a trailing dot ignored, where a SAN's first label may be exactly "*" standing for one
// whole label. The subject's common name is never read. `ip_sans` are textual addresses.
bool SansCoverHost(const std::vector<std::string>& dns_sans,
                   const std::vector<std::string>& ip_sans, std::string_view host);

}  // namespace certctl::pki
