#include "certctl/util/base64.h"

#include <array>
#include <cstdint>

namespace certctl {
namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int, 256> MakeDecodeTable() {
  std::array<int, 256> table{};
  for (int& entry : table) {
    entry = -1;
  }
  for (std::size_t i = 0; i < kAlphabet.size(); ++i) {
    table[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int>(i);
  }
  return table;
}

constexpr std::array<int, 256> kDecodeTable = MakeDecodeTable();

}  // namespace

std::string Base64Encode(std::string_view data) {
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= data.size(); i += 3) {
    const std::uint32_t chunk =
        (static_cast<std::uint32_t>(static_cast<unsigned char>(data[i])) << 16) |
        (static_cast<std::uint32_t>(static_cast<unsigned char>(data[i + 1])) << 8) |
        static_cast<unsigned char>(data[i + 2]);
    out += kAlphabet[(chunk >> 18) & 63];
    out += kAlphabet[(chunk >> 12) & 63];
    out += kAlphabet[(chunk >> 6) & 63];
    out += kAlphabet[chunk & 63];
  }
  const std::size_t rest = data.size() - i;
  if (rest > 0) {
    std::uint32_t chunk = static_cast<std::uint32_t>(static_cast<unsigned char>(data[i])) << 16;
    if (rest == 2) {
      chunk |= static_cast<std::uint32_t>(static_cast<unsigned char>(data[i + 1])) << 8;
    }
    out += kAlphabet[(chunk >> 18) & 63];
    out += kAlphabet[(chunk >> 12) & 63];
    out += rest == 2 ? kAlphabet[(chunk >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

Result<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return Fail(
        ErrorCode::kInvalidArgument,
        "invalid base64: length " + std::to_string(text.size()) + " is not a multiple of 4");
  }
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    std::uint32_t chunk = 0;
    int padding = 0;
    for (std::size_t j = 0; j < 4; ++j) {
      const char c = text[i + j];
      int value = 0;
      if (c == '=' && last && j >= 2) {
        ++padding;
      } else {
        value = kDecodeTable[static_cast<unsigned char>(c)];
        if (value < 0 || padding > 0) {
          return Fail(
              ErrorCode::kInvalidArgument,
              "invalid base64: unexpected character at position " + std::to_string(i + j + 1));
        }
      }
      chunk = (chunk << 6) | static_cast<std::uint32_t>(value);
    }
    out += static_cast<char>((chunk >> 16) & 0xff);
    if (padding < 2) {
      out += static_cast<char>((chunk >> 8) & 0xff);
    }
    if (padding < 1) {
      out += static_cast<char>(chunk & 0xff);
    }
  }
  return out;
}

}  // namespace certctl
