#include "certctl/pki/names.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <set>
#include <string>

#include "certctl/util/text.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace certctl::pki {
namespace {

constexpr std::size_t kMaxLabel = 63;
constexpr std::size_t kMaxName = 253;
constexpr char kLabelRule[] =
    "letters, digits and '-', starting and ending with a letter or digit, at most 63 characters";

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// RFC 1123 label; `lowercase_only` for Kubernetes object names.
bool IsLabel(std::string_view label, bool lowercase_only) {
  if (label.empty() || label.size() > kMaxLabel || !IsAlnum(label.front()) ||
      !IsAlnum(label.back())) {
    return false;
  }
  for (const char c : label) {
    if (!IsAlnum(c) && c != '-') {
      return false;
    }
    if (lowercase_only && std::isupper(static_cast<unsigned char>(c)) != 0) {
      return false;
    }
  }
  return true;
}

std::string StripTrailingDot(std::string_view name) {
  if (!name.empty() && name.back() == '.') {
    name.remove_suffix(1);
  }
  return std::string(name);
}

Status FieldError(std::string_view field, std::string_view value, std::string_view reason) {
  return Fail(ErrorCode::kInvalidArgument,
              std::string(field) + " " + Quoted(value) + ": " + std::string(reason));
}

Status ValidateObjectName(std::string_view field, std::string_view value) {
  if (IsLabel(value, /*lowercase_only=*/true)) {
    return {};
  }
  return FieldError(field, value,
                    "must be a lowercase RFC 1123 label (a-z, 0-9 and '-', starting and ending "
                    "with a letter or digit, at most 63 characters)");
}

}  // namespace

Status ValidateDnsName(std::string_view name, Wildcard wildcard) {
  if (name.empty()) {
    return Fail(ErrorCode::kInvalidArgument, "empty DNS name");
  }
  if (name.size() > kMaxName) {
    return Fail(ErrorCode::kInvalidArgument, "DNS name longer than 253 characters");
  }
  if (name.back() == '.') {
    return Fail(ErrorCode::kInvalidArgument, "DNS name ends with a dot");
  }
  std::size_t start = 0;
  bool first = true;
  while (start <= name.size()) {
    std::size_t dot = name.find('.', start);
    if (dot == std::string_view::npos) {
      dot = name.size();
    }
    const std::string_view label = name.substr(start, dot - start);
    if (first && label == "*") {
      if (wildcard == Wildcard::kReject) {
        return Fail(ErrorCode::kInvalidArgument, "wildcard names are not allowed here");
      }
      if (dot == name.size()) {
        return Fail(ErrorCode::kInvalidArgument, "a wildcard needs a domain after \"*.\"");
      }
    } else if (label.find('*') != std::string_view::npos) {
      return Fail(ErrorCode::kInvalidArgument,
                  "a wildcard is only allowed as the whole first label (\"*.example.com\")");
    } else if (label.empty()) {
      return Fail(ErrorCode::kInvalidArgument, "empty label (two dots in a row)");
    } else if (!IsLabel(label, /*lowercase_only=*/false)) {
      return Fail(ErrorCode::kInvalidArgument,
                  "label " + Quoted(label) + " is not an RFC 1123 label (" + kLabelRule + ")");
    }
    first = false;
    start = dot + 1;
  }
  return {};
}

Status ValidateIpAddress(std::string_view text) {
  const std::string address(text);
  unsigned char buffer[sizeof(in6_addr)];
  if (inet_pton(AF_INET, address.c_str(), buffer) == 1 ||
      inet_pton(AF_INET6, address.c_str(), buffer) == 1) {
    return {};
  }
  return Fail(ErrorCode::kInvalidArgument, "not an IPv4 or IPv6 address");
}

namespace {

// An IPv4 or IPv6 address as 16 bytes (IPv4 mapped into IPv6, so the two spellings of one
// address compare equal, as Go's net.IP.Equal has it); nullopt when `text` is neither.
std::optional<std::array<unsigned char, 16>> ParseIp(std::string_view text) {
  const std::string address(text);
  std::array<unsigned char, 16> bytes{};
  if (inet_pton(AF_INET6, address.c_str(), bytes.data()) == 1) {
    return bytes;
  }
  unsigned char v4[4];
  if (inet_pton(AF_INET, address.c_str(), v4) != 1) {
    return std::nullopt;
  }
  bytes.fill(0);
  bytes[10] = 0xff;
  bytes[11] = 0xff;
  std::copy(std::begin(v4), std::end(v4), bytes.begin() + 12);
  return bytes;
}

std::vector<std::string_view> Labels(std::string_view name) {
  std::vector<std::string_view> labels;
  for (std::size_t start = 0;;) {
    const std::size_t dot = name.find('.', start);
    labels.push_back(name.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) {
      return labels;
    }
    start = dot + 1;
  }
}

// Go's validHostname: labels of letters, digits, '_' and non-leading '-'; a pattern may
// start with a whole "*" label; a host may end in one dot.
bool GoValidHostname(std::string_view name, bool pattern) {
  if (!pattern && !name.empty() && name.back() == '.') {
    name.remove_suffix(1);
  }
  if (name.empty() || name == "*") {
    return false;
  }
  const std::vector<std::string_view> labels = Labels(name);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const std::string_view label = labels[i];
    if (label.empty()) {
      return false;
    }
    if (pattern && i == 0 && label == "*") {
      continue;
    }
    for (std::size_t j = 0; j < label.size(); ++j) {
      const char c = label[j];
      if (IsAlnum(c) || c == '_' || (c == '-' && j != 0)) {
        continue;
      }
      return false;
    }
  }
  return true;
}

bool MatchPattern(std::string_view pattern, std::string_view host) {
  const std::string lower_pattern = AsciiLower(pattern);
  const std::string lower_host = StripTrailingDot(AsciiLower(host));
  if (lower_pattern.empty() || lower_host.empty()) {
    return false;
  }
  const std::vector<std::string_view> pattern_labels = Labels(lower_pattern);
  const std::vector<std::string_view> host_labels = Labels(lower_host);
  if (pattern_labels.size() != host_labels.size()) {
    return false;
  }
  for (std::size_t i = 0; i < pattern_labels.size(); ++i) {
    if (!(i == 0 && pattern_labels[i] == "*") && pattern_labels[i] != host_labels[i]) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool SansCoverHost(const std::vector<std::string>& dns_sans,
                   const std::vector<std::string>& ip_sans, std::string_view host) {
  std::string_view candidate_ip = host;
  if (candidate_ip.size() >= 3 && candidate_ip.front() == '[' && candidate_ip.back() == ']') {
    candidate_ip = candidate_ip.substr(1, candidate_ip.size() - 2);
  }
  if (auto ip = ParseIp(candidate_ip)) {
    // An IP host matches IP SANs only (RFC 6125, appendix B.2).
    return std::any_of(ip_sans.begin(), ip_sans.end(),
                       [&](const std::string& san) { return ParseIp(san) == ip; });
  }
  const bool valid_host = GoValidHostname(host, /*pattern=*/false);
  return std::any_of(dns_sans.begin(), dns_sans.end(), [&](const std::string& san) {
    if (valid_host && GoValidHostname(san, /*pattern=*/true)) {
      return MatchPattern(san, host);
    }
    // Anything else matches only to the letter (case aside), never by wildcard or dot.
    return !san.empty() && san != "." && !host.empty() && host != "." &&
           AsciiLower(san) == AsciiLower(host);
  });
}

std::vector<std::string> RequiredDnsNames(const ServiceIdentity& identity) {
  std::vector<std::string> candidates;
  if (!identity.service.empty()) {
    const std::string& service = identity.service;
    if (identity.namespace_name.empty()) {
      candidates.push_back(service);
    } else {
      const std::string with_namespace = service + "." + identity.namespace_name;
      candidates.push_back(with_namespace + ".svc");
      candidates.push_back(service);
      candidates.push_back(with_namespace);
      const std::string domain = StripTrailingDot(identity.cluster_domain);
      if (!domain.empty()) {
        candidates.push_back(with_namespace + ".svc." + domain);
      }
    }
  }
  candidates.insert(candidates.end(), identity.extra_dns_names.begin(),
                    identity.extra_dns_names.end());

  std::vector<std::string> out;
  std::set<std::string> seen;  // lower-case, DNS names compare case-insensitively
  for (std::string& name : candidates) {
    if (seen.insert(AsciiLower(name)).second) {
      out.push_back(std::move(name));
    }
  }
  return out;
}

Status ValidateIdentity(const ServiceIdentity& identity) {
  if (const std::size_t extra = identity.extra_dns_names.size() + identity.ip_addresses.size();
      extra > kMaxExtraNames) {
    return Fail(ErrorCode::kInvalidArgument,
                "--dns-name and --ip: " + std::to_string(extra) + " names given, at most " +
                    std::to_string(kMaxExtraNames) +
                    " (the Service's own names come on top): a webhook needs a few");
  }
  if (identity.service.empty() && identity.extra_dns_names.empty()) {
    return Fail(ErrorCode::kInvalidArgument,
                "--service or --dns-name is required: the certificate needs at least one DNS name");
  }
  if (!identity.service.empty()) {
    if (auto status = ValidateObjectName("--service", identity.service); !status) {
      return status;
    }
    if (identity.namespace_name.empty()) {
      return Fail(ErrorCode::kInvalidArgument, "--namespace is required with --service");
    }
  }
  if (!identity.namespace_name.empty()) {
    if (auto status = ValidateObjectName("--namespace", identity.namespace_name); !status) {
      return status;
    }
  }
  const std::string domain = StripTrailingDot(identity.cluster_domain);
  if (domain.empty()) {
    return FieldError("--cluster-domain", identity.cluster_domain, "must not be empty");
  }
  if (auto status = ValidateDnsName(domain, Wildcard::kReject); !status) {
    return FieldError("--cluster-domain", identity.cluster_domain, status.error().message());
  }
  for (const std::string& name : identity.extra_dns_names) {
    if (auto status = ValidateDnsName(name, Wildcard::kAllow); !status) {
      return FieldError("--dns-name", name, status.error().message());
    }
  }
  for (const std::string& address : identity.ip_addresses) {
    if (auto status = ValidateIpAddress(address); !status) {
      return FieldError("--ip", address, status.error().message());
    }
  }
  if (!identity.service.empty()) {
    for (const std::string& name : RequiredDnsNames(identity)) {
      if (name.size() > kMaxName) {
        return FieldError("--cluster-domain", identity.cluster_domain,
                          "the service name " + Quoted(name) + " is longer than 253 characters");
      }
    }
  }
  return {};
}

}  // namespace certctl::pki
