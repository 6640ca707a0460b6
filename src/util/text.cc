#include "certctl/util/text.h"

#include <cctype>

namespace certctl {
namespace {

// Length of the UTF-8 sequence starting at text[pos], or 0 when it is not well formed
// (overlong forms, surrogates and code points past U+10FFFF included).
std::size_t Utf8Length(std::string_view text, std::size_t pos) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[pos + i]); };
  const unsigned char lead = byte(0);
  std::size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xbf;
  if (lead < 0x80) {
    return 1;
  }
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    low = lead == 0xe0 ? 0xa0 : 0x80;
    high = lead == 0xed ? 0x9f : 0xbf;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    low = lead == 0xf0 ? 0x90 : 0x80;
    high = lead == 0xf4 ? 0x8f : 0xbf;
  } else {
    return 0;
  }
  if (pos + length > text.size()) {
    return 0;
  }
  if (byte(1) < low || byte(1) > high) {
    return 0;
  }
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xbf) {
      return 0;
    }
  }
  return length;
}

bool IsControlOrSpace(std::string_view character) {
  const auto first = static_cast<unsigned char>(character[0]);
  if (character.size() == 1) {
    return first <= 0x20 || first == 0x7f;
  }
  const auto second = static_cast<unsigned char>(character[1]);
  if (character.size() == 2) {
    // U+0080..U+009F (C1 controls) and U+00A0 (no-break space).
    return first == 0xc2 && second <= 0xa0;
  }
  if (character.size() == 3 && first == 0xe2) {
    // Bidirectional controls, which reorder what a terminal shows: U+200E, U+200F,
    // U+202A..U+202E and U+2066..U+2069; and the line and paragraph separators.
    const auto third = static_cast<unsigned char>(character[2]);
    return (second == 0x80 &&
            (third == 0x8e || third == 0x8f || (third >= 0xa8 && third <= 0xae))) ||
           (second == 0x81 && third >= 0xa6 && third <= 0xa9);
  }
  return false;
}

}  // namespace

std::string OneLine(std::string_view text, std::size_t max_bytes) {
  constexpr std::string_view kEllipsis = "...";
  std::string line;
  bool pending_space = false;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t length = Utf8Length(text, pos);
    const std::string_view character = length == 0 ? "?" : text.substr(pos, length);
    pos += length == 0 ? 1 : length;
    if (IsControlOrSpace(character)) {
      pending_space = !line.empty();
      continue;
    }
    const std::size_t needed = character.size() + (pending_space ? 1 : 0);
    if (line.size() + needed > max_bytes) {
      line += kEllipsis;
      return line;
    }
    if (pending_space) {
      line += ' ';
      pending_space = false;
    }
    line += character;
  }
  return line;
}

std::string AsciiLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::string Quoted(std::string_view text) { return "\"" + std::string(text) + "\""; }

}  // namespace certctl
