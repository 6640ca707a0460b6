#include "endpoints/http_request.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace certctl::endpoints {
namespace {

bool IsTokenChar(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
    return true;
  }
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), IsTokenChar);
}

// Field values may hold visible characters, spaces, tabs and obs-text; never CR, LF, NUL
// or other controls (they are how header injection and smuggling start).
bool IsFieldValue(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte == '\t' || (byte >= 0x20 && byte != 0x7F);
  });
}

char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return Lower(x) == Lower(y); });
}

std::string_view TrimWhitespace(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) {
    return {};
  }
  const auto last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  const char lower = Lower(c);
  return (lower >= 'a' && lower <= 'f') ? lower - 'a' + 10 : -1;
}

// The head's lines, without their line ends, and its length; nullopt while the blank line
// is still to come.
struct HeadLines {
  std::vector<std::string_view> lines;
  std::size_t length = 0;
};

std::optional<HeadLines> SplitHead(std::string_view buffer) {
  const std::string_view window = buffer.substr(0, std::min(buffer.size(), kMaxRequestHead));
  std::size_t start = 0;
  // Blank lines before a request line are tolerated: some clients end a body with an extra CRLF.
  while (start < window.size() && (window[start] == '\n' || window.substr(start, 2) == "\r\n")) {
    start += window[start] == '\n' ? 1 : 2;
  }
  HeadLines head;
  while (true) {
    const std::size_t end = window.find('\n', start);
    if (end == std::string_view::npos) {
      return std::nullopt;
    }
    std::string_view line = window.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    start = end + 1;
    if (line.empty()) {
      head.length = start;
      return head;
    }
    head.lines.push_back(line);
  }
}

// "HTTP/1.1" -> 1; nullopt for anything that is not HTTP/<digit>.<digit>, -1 for another
// major version.
std::optional<int> MinorVersion(std::string_view version) {
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' ||
      HexValue(version[5]) < 0 || HexValue(version[5]) > 9 || HexValue(version[7]) < 0 ||
      HexValue(version[7]) > 9) {
    return std::nullopt;
  }
  return version[5] == '1' ? version[7] - '0' : -1;
}

bool ParseRequestLine(std::string_view line, RequestHead& head, ParseState& error) {
  error = ParseState::kBadRequest;
  const std::size_t first_space = line.find(' ');
  const std::size_t second_space =
      first_space == std::string_view::npos ? first_space : line.find(' ', first_space + 1);
  if (second_space == std::string_view::npos ||
      line.find(' ', second_space + 1) != std::string_view::npos) {
    return false;
  }
  const std::string_view method = line.substr(0, first_space);
  const std::string_view target = line.substr(first_space + 1, second_space - first_space - 1);
  const auto minor = MinorVersion(line.substr(second_space + 1));
  if (!IsToken(method) || target.empty() || !minor) {
    return false;
  }
  if (*minor < 0) {
    error = ParseState::kBadVersion;
    return false;
  }
  const bool visible = std::all_of(target.begin(), target.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte > 0x20 && byte < 0x7F && c != '#';
  });
  if (!visible || (target[0] != '/' && target != "*")) {
    return false;
  }
  head.method = method;
  head.minor_version = *minor;
  const std::size_t question = target.find('?');
  if (!PercentDecode(target.substr(0, question), false, head.path)) {
    return false;
  }
  return question == std::string_view::npos || ParseQuery(target.substr(question + 1), head.query);
}

struct FieldsSeen {
  int hosts = 0;
  bool close = false;
  bool keep_alive = false;
  bool transfer_encoding = false;
  std::optional<std::uint64_t> content_length;
};

bool ReadField(std::string_view line, FieldsSeen& seen) {
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) {
    return false;  // also a folded line (it starts with whitespace)
  }
  const std::string_view name = line.substr(0, colon);
  const std::string_view value = TrimWhitespace(line.substr(colon + 1));
  if (!IsFieldValue(value)) {
    return false;
  }
  if (EqualsIgnoringCase(name, "host")) {
    ++seen.hosts;
  } else if (EqualsIgnoringCase(name, "connection")) {
    std::string_view rest = value;
    while (!rest.empty()) {
      const std::size_t comma = rest.find(',');
      const std::string_view option = TrimWhitespace(rest.substr(0, comma));
      seen.close = seen.close || EqualsIgnoringCase(option, "close");
      seen.keep_alive = seen.keep_alive || EqualsIgnoringCase(option, "keep-alive");
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  } else if (EqualsIgnoringCase(name, "transfer-encoding")) {
    seen.transfer_encoding = true;
  } else if (EqualsIgnoringCase(name, "content-length")) {
    std::uint64_t length = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), length);
    if (value.empty() || error != std::errc() || end != value.data() + value.size() ||
        (seen.content_length && *seen.content_length != length)) {
      return false;
    }
    seen.content_length = length;
  }
  return true;
}

}  // namespace

bool PercentDecode(std::string_view text, bool plus_is_space, std::string& out) {
  out.clear();
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      const int high = i + 2 < text.size() ? HexValue(text[i + 1]) : -1;
      const int low = high >= 0 ? HexValue(text[i + 2]) : -1;
      if (low < 0 || (high == 0 && low == 0)) {
        return false;
      }
      c = static_cast<char>(high * 16 + low);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      c = ' ';
    }
    out.push_back(c);
  }
  return true;
}

bool ParseQuery(std::string_view text, Query& out) {
  while (!text.empty()) {
    const std::size_t amp = text.find('&');
    const std::string_view part = text.substr(0, amp);
    text = amp == std::string_view::npos ? std::string_view() : text.substr(amp + 1);
    if (part.empty()) {
      continue;
    }
    const std::size_t equals = part.find('=');
    std::string name;
    std::string value;
    if (!PercentDecode(part.substr(0, equals), true, name) ||
        (equals != std::string_view::npos &&
         !PercentDecode(part.substr(equals + 1), true, value))) {
      return false;
    }
    out.emplace(std::move(name), std::move(value));
  }
  return true;
}

ParseOutcome ParseRequestHead(std::string_view buffer) {
  ParseOutcome outcome;
  const auto split = SplitHead(buffer);
  if (!split) {
    outcome.state =
        buffer.size() >= kMaxRequestHead ? ParseState::kHeadTooLarge : ParseState::kIncomplete;
    return outcome;
  }
  ParseState error = ParseState::kBadRequest;
  if (!ParseRequestLine(split->lines.front(), outcome.head, error)) {
    outcome.state = error;
    return outcome;
  }
  FieldsSeen seen;
  for (std::size_t i = 1; i < split->lines.size(); ++i) {
    if (!ReadField(split->lines[i], seen)) {
      outcome.state = ParseState::kBadRequest;
      return outcome;
    }
  }
  // Both framings at once is how requests are smuggled; HTTP/1.1 requires one Host.
  const bool one_host = outcome.head.minor_version == 0 ? seen.hosts <= 1 : seen.hosts == 1;
  if ((seen.transfer_encoding && seen.content_length) || !one_host) {
    outcome.state = ParseState::kBadRequest;
    return outcome;
  }
  RequestHead& head = outcome.head;
  head.keep_alive = !seen.close && (head.minor_version >= 1 || seen.keep_alive);
  head.has_body = seen.transfer_encoding || seen.content_length.value_or(0) > 0;
  outcome.state = ParseState::kComplete;
  outcome.consumed = split->length;
  return outcome;
}

}  // namespace certctl::endpoints
