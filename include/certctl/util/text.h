#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace certctl {

// `text` made safe to print on one log or terminal line: runs of white space and control
// characters (C0, DEL and the C1 range, which terminals may read as escape sequences, the
// Unicode line separators and the bidirectional controls that reorder what is shown) become
// one space, bytes that are not UTF-8 become '?', and the result is clipped to at most
// `max_bytes` (on a character boundary, then "...").
std::string OneLine(std::string_view text, std::size_t max_bytes);

// `text` with ASCII letters in lower case (DNS names, key types, hex): locale-independent.
std::string AsciiLower(std::string_view text);

// `text` in double quotes, for names and values quoted in messages.
std::string Quoted(std::string_view text);

// The strings of `items` in their order, separated by ", ", for lists in messages.
template <typename Strings>
std::string JoinWithCommas(const Strings& items) {
  std::string text;
  for (const auto& item : items) {
    if (!text.empty()) {
      text += ", ";
    }
    text += item;
  }
  return text;
}

}  // namespace certctl
