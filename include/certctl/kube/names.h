#pragma once

#include <string_view>

#include "certctl/util/result.h"

namespace certctl::kube {

// The rule the API server holds the names of most objects to (Secrets, Leases, webhook
// configurations, CRDs, APIServices), and label key prefixes too, written out for messages.
inline constexpr char kSubdomainRule[] =
    "a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', starting and ending with a "
    "letter or digit, at most 253 characters";

// The rule for namespaces, written out for messages.
inline constexpr char kLabelRule[] =
    "a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter "
    "or digit, at most 63 characters";

// kInvalidArgument saying what breaks kSubdomainRule (not naming the field), as the API
// server's IsDNS1123Subdomain: labels of [a-z0-9-] joined by dots, each starting and ending
// alphanumeric, 253 characters in all.
Status ValidateSubdomainName(std::string_view name);

// kInvalidArgument saying what breaks kLabelRule, as the API server's IsDNS1123Label.
Status ValidateLabelName(std::string_view name);

}  // namespace certctl::kube
