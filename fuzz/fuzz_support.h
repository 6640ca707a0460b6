#pragma once

// What every fuzz target shares: a property check that stops the run where it fails, and
// the split of one input into the parts a target needs.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

// A broken property is a crash: libFuzzer keeps the input and the stack shows the line.
#define FUZZ_CHECK(condition) \
  do {                        \
    if (!(condition)) {       \
      __builtin_trap();       \
    }                         \
  } while (false)

namespace certctl::fuzz {

// Separates the parts of one input; the dictionaries carry it so mutations find it.
inline constexpr std::string_view kPartSeparator = "\n%%\n";

inline std::string_view AsText(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// At most `max_parts` parts; the last one keeps any further separators.
inline std::vector<std::string_view> SplitParts(std::string_view input, std::size_t max_parts) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < max_parts) {
    const std::size_t at = input.find(kPartSeparator);
    if (at == std::string_view::npos) {
      break;
    }
    parts.push_back(input.substr(0, at));
    input.remove_prefix(at + kPartSeparator.size());
  }
  parts.push_back(input);
  return parts;
}

}  // namespace certctl::fuzz
