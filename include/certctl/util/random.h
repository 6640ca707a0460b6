#pragma once

#include <cstddef>
#include <string>

namespace certctl {

// `length` random characters from [a-z0-9], for names that must not collide: temporary
// files, leader-election identities. Not for secrets.
std::string RandomSuffix(std::size_t length = 8);

}  // namespace certctl
