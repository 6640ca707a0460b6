#include "certctl/util/environment.h"

#include <cstdlib>

namespace certctl {

std::optional<std::string> SystemEnvironment::Get(std::string_view name) const {
  const char* value = std::getenv(std::string(name).c_str());
  return value == nullptr ? std::nullopt : std::optional<std::string>(value);
}

}  // namespace certctl
