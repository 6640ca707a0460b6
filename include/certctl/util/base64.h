#pragma once

#include <string>
#include <string_view>

#include "certctl/util/result.h"

namespace certctl {

// Standard alphabet with padding, as Kubernetes stores Secret data.
std::string Base64Encode(std::string_view data);

// Accepts padded standard base64; rejects anything else with the offending position.
Result<std::string> Base64Decode(std::string_view text);

}  // namespace certctl
