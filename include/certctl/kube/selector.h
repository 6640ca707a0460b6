#pragma once

#include <string_view>

#include "certctl/util/result.h"

namespace certctl::kube {

// Checks a label selector the way the API server parses one (labels.Parse): requirements
// separated by commas, each `key`, `!key`, `key=value`, `key==value`, `key!=value`,
// `key in (v1,v2)`, `key notin (v1,v2)`, `key>N` or `key<N`, with optional spaces between
// tokens. Keys are `[prefix/]name` (a DNS subdomain prefix, a name of at most 63 characters
// of [A-Za-z0-9-_.] starting and ending alphanumeric), values such names or empty.
// kInvalidArgument says what is wrong and where, so a malformed --webhook-selector is a usage
// error before anything is sent.
Status ValidateLabelSelector(std::string_view selector);

// True for a selector with no requirement (empty or only spaces): the API server reads it as
// "every object", so it selects everything rather than nothing.
bool SelectsEverything(std::string_view selector);

}  // namespace certctl::kube
