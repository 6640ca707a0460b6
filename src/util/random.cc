#include "certctl/util/random.h"

#include <random>
#include <string_view>

namespace certctl {

std::string RandomSuffix(std::size_t length) {
  static thread_local std::mt19937_64 engine(std::random_device{}());
  constexpr std::string_view kChars = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string suffix;
  suffix.reserve(length);
  for (std::size_t i = 0; i < length; ++i) {
    suffix += kChars[engine() % kChars.size()];
  }
  return suffix;
}

}  // namespace certctl
