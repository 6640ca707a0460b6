#include "certctl/util/duration.h"

#include <charconv>
#include <cstdint>
#include <ctime>
#include <utility>

namespace certctl {
namespace {

struct Unit {
  char symbol;
  std::int64_t seconds;
};

// Largest first, so FormatDuration picks the shortest spelling.
constexpr Unit kUnits[] = {
    {'y', 365 * 86400}, {'d', 86400}, {'h', 3600}, {'m', 60}, {'s', 1},
};

const Unit* FindUnit(char symbol) {
  for (const Unit& unit : kUnits) {
    if (unit.symbol == symbol) {
      return &unit;
    }
  }
  return nullptr;
}

// Units people write that certctl does not take, each with the reason and what to write.
struct RefusedUnit {
  std::string_view spelling;
  std::string_view explanation;
};
constexpr RefusedUnit kRefusedUnits[] = {
    {"ms", "milliseconds (ms) are not supported; the shortest unit is s (seconds)"},
    {"us", "microseconds (us) are not supported; the shortest unit is s (seconds)"},
    {"\u00b5s", "microseconds (\u00b5s) are not supported; the shortest unit is s (seconds)"},
    {"ns", "nanoseconds (ns) are not supported; the shortest unit is s (seconds)"},
    {"w", "weeks (w) are not a unit; write days, e.g. 14d"},
    {"M", "months (M) are not a unit, and m is minutes; write days, e.g. 180d"},
    {"mo", "months (mo) are not a unit, and m is minutes; write days, e.g. 180d"},
};

// The refused unit `text` has at `pos`, if any. Checked before the accepted units, so "90ms"
// is not read as 90 minutes followed by garbage; a valid duration never has "ms" or "mo"
// (after m comes a number or the end).
const RefusedUnit* FindRefusedUnit(std::string_view text, std::size_t pos) {
  const std::string_view rest = text.substr(pos);
  for (const RefusedUnit& unit : kRefusedUnits) {
    if (rest.starts_with(unit.spelling)) {
      return &unit;
    }
  }
  return nullptr;
}

// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
std::int64_t DaysFromCivil(std::int64_t year, unsigned month, unsigned day) {
  year -= month <= 2 ? 1 : 0;
  const std::int64_t era = (year >= 0 ? year : year - 399) / 400;
  const auto year_of_era = static_cast<unsigned>(year - era * 400);
  const unsigned day_of_year = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
  const unsigned day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + static_cast<std::int64_t>(day_of_era) - 719468;
}

bool ParseDigits(std::string_view text, std::size_t& pos, std::size_t count, int& out) {
  if (pos + count > text.size()) {
    return false;
  }
  const char* begin = text.data() + pos;
  auto [ptr, ec] = std::from_chars(begin, begin + count, out);
  if (ec != std::errc() || ptr != begin + count) {
    return false;
  }
  pos += count;
  return true;
}

bool Expect(std::string_view text, std::size_t& pos, char c) {
  if (pos < text.size() && (text[pos] == c || (c == 'T' && text[pos] == 't'))) {
    ++pos;
    return true;
  }
  return false;
}

}  // namespace

Result<std::chrono::seconds> ParseDuration(std::string_view text, bool allow_zero) {
  const std::string quoted = "\"" + std::string(text) + "\"";
  if (text.empty()) {
    return Fail(ErrorCode::kInvalidArgument, "empty duration (use e.g. 720h, 30d, 10y)");
  }
  std::int64_t total = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::int64_t amount = 0;
    const char* begin = text.data() + pos;
    auto [ptr, ec] = std::from_chars(begin, text.data() + text.size(), amount);
    const auto too_long = [&] {
      return Fail(ErrorCode::kInvalidArgument, "invalid duration " + quoted +
                                                   ": longer than the maximum of " +
                                                   FormatDuration(kMaxDuration));
    };
    // A number too big for 64 bits is a duration far past the maximum, not a typo.
    if (ec == std::errc::result_out_of_range && *begin >= '0' && *begin <= '9') {
      return too_long();
    }
    if (ec != std::errc() || ptr == begin || *begin < '0' || *begin > '9') {
      return Fail(ErrorCode::kInvalidArgument,
                  "invalid duration " + quoted + ": expected a number at position " +
                      std::to_string(pos + 1) + " (use e.g. 720h, 30d, 10y)");
    }
    pos = static_cast<std::size_t>(ptr - text.data());
    if (pos >= text.size()) {
      return Fail(ErrorCode::kInvalidArgument,
                  "invalid duration " + quoted + ": missing unit after " + std::to_string(amount) +
                      " (one of s, m, h, d, y)");
    }
    if (const RefusedUnit* refused = FindRefusedUnit(text, pos)) {
      return Fail(ErrorCode::kInvalidArgument,
                  "invalid duration " + quoted + ": " + std::string(refused->explanation));
    }
    const Unit* unit = FindUnit(text[pos]);
    if (unit == nullptr) {
      return Fail(ErrorCode::kInvalidArgument, "invalid duration " + quoted + ": unknown unit '" +
                                                   std::string(1, text[pos]) +
                                                   "' (one of s, m, h, d, y)");
    }
    ++pos;
    // Checked before adding, so no amount can overflow the sum on its way past the maximum.
    if (amount > (kMaxDuration.count() - total) / unit->seconds) {
      return too_long();
    }
    total += amount * unit->seconds;
  }
  if (total == 0 && !allow_zero) {
    return Fail(ErrorCode::kInvalidArgument, "invalid duration " + quoted + ": must be positive");
  }
  return std::chrono::seconds(total);
}

std::optional<std::string> DurationAmbiguity(std::string_view text) {
  // Minutes right after years or days: "1y6m" reads as a year and a half, but is a year and
  // six minutes. The warning spells the value out in words, as it was parsed.
  static constexpr std::pair<char, std::string_view> kWords[] = {
      {'y', "year"}, {'d', "day"}, {'h', "hour"}, {'m', "minute"}, {'s', "second"}};
  std::string spelled;
  std::string_view amount;
  char previous_unit = 0;
  bool ambiguous = false;
  std::size_t start = 0;
  for (std::size_t pos = 0; pos < text.size(); ++pos) {
    const char c = text[pos];
    if (c >= '0' && c <= '9') {
      continue;
    }
    amount = text.substr(start, pos - start);
    start = pos + 1;
    ambiguous = ambiguous || (c == 'm' && (previous_unit == 'y' || previous_unit == 'd'));
    previous_unit = c;
    for (const auto& [symbol, word] : kWords) {
      if (symbol == c) {
        spelled += (spelled.empty() ? "" : " and ") + std::string(amount) + " " +
                   std::string(word) + (amount == "1" ? "" : "s");
      }
    }
  }
  if (!ambiguous) {
    return std::nullopt;
  }
  return "\"" + std::string(text) + "\" is " + spelled +
         ": m is minutes, not months; write months as days (e.g. 1y180d)";
}

std::string FormatDuration(std::chrono::seconds duration) {
  std::int64_t remaining = duration.count();
  if (remaining == 0) {
    return "0s";
  }
  std::string out;
  if (remaining < 0) {
    out += '-';
    remaining = -remaining;
  }
  for (const Unit& unit : kUnits) {
    if (remaining >= unit.seconds) {
      out += std::to_string(remaining / unit.seconds);
      out += unit.symbol;
      remaining %= unit.seconds;
    }
  }
  return out;
}

std::string FormatRfc3339(TimePoint time) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buffer[32];
  const std::size_t length = std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return std::string(buffer, length);
}

Result<TimePoint> ParseRfc3339(std::string_view text) {
  auto invalid = [&] {
    return Fail(ErrorCode::kInvalidArgument, "invalid RFC 3339 time \"" + std::string(text) + "\"");
  };
  std::size_t pos = 0;
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!ParseDigits(text, pos, 4, year) || !Expect(text, pos, '-') ||
      !ParseDigits(text, pos, 2, month) || !Expect(text, pos, '-') ||
      !ParseDigits(text, pos, 2, day) || !Expect(text, pos, 'T') ||
      !ParseDigits(text, pos, 2, hour) || !Expect(text, pos, ':') ||
      !ParseDigits(text, pos, 2, minute) || !Expect(text, pos, ':') ||
      !ParseDigits(text, pos, 2, second)) {
    return invalid();
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return invalid();
  }
  std::int64_t nanos = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    std::int64_t scale = 100000000;
    const std::size_t start = pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      nanos += (text[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start) {
      return invalid();
    }
  }
  std::int64_t offset_seconds = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    int offset_hours = 0, offset_minutes = 0;
    if (!ParseDigits(text, pos, 2, offset_hours) || !Expect(text, pos, ':') ||
        !ParseDigits(text, pos, 2, offset_minutes)) {
      return invalid();
    }
    offset_seconds = sign * (offset_hours * 3600 + offset_minutes * 60);
  } else {
    return invalid();
  }
  if (pos != text.size()) {
    return invalid();
  }
  const std::int64_t days =
      DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  const std::int64_t epoch_seconds =
      days * 86400 + hour * 3600 + minute * 60 + second - offset_seconds;
  // A TimePoint counts nanoseconds from 1677 to 2262, fewer years than RFC 3339 spells (an
  // exec plugin may well say 9999): saturate at its ends, as certificate times do.
  const auto earliest = std::chrono::ceil<std::chrono::seconds>(TimePoint::min());
  const auto latest = std::chrono::floor<std::chrono::seconds>(TimePoint::max());
  if (epoch_seconds < earliest.time_since_epoch().count()) {
    return TimePoint(earliest);
  }
  if (epoch_seconds >= latest.time_since_epoch().count()) {
    return TimePoint(latest);
  }
  return TimePoint(std::chrono::duration_cast<TimePoint::duration>(
      std::chrono::seconds(epoch_seconds) + std::chrono::nanoseconds(nanos)));
}

}  // namespace certctl
