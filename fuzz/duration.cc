// Durations ("720h", "1y6m", "90s") and RFC 3339 times, as flags and annotations spell them.
// Properties:
//  - a parsed duration is within [0, kMaxDuration], positive unless zero is allowed, and the
//    strict and the lenient parse agree on everything but zero;
//  - FormatDuration writes what ParseDuration reads back to the same value, and formatting
//    that again gives the same text (the spelling is canonical);
//  - an RFC 3339 time formatted and parsed again is the same second, whenever the format has
//    a four-digit year.

#include "certctl/util/duration.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"

namespace {

using certctl::FormatDuration;
using certctl::FormatRfc3339;
using certctl::kMaxDuration;
using certctl::ParseDuration;
using certctl::ParseRfc3339;
using certctl::TimePoint;

void CheckDuration(std::string_view text) {
  const auto strict = ParseDuration(text);
  const auto lenient = ParseDuration(text, /*allow_zero=*/true);
  if (strict) {
    FUZZ_CHECK(strict->count() > 0 && *strict <= kMaxDuration);
    FUZZ_CHECK(lenient && *lenient == *strict);
  }
  if (!lenient) {
    FUZZ_CHECK(!strict);
    FUZZ_CHECK(!lenient.error().message().empty());
    return;
  }
  FUZZ_CHECK(lenient->count() >= 0 && *lenient <= kMaxDuration);
  FUZZ_CHECK(strict.has_value() == (lenient->count() > 0));

  const std::string formatted = FormatDuration(*lenient);
  const auto again = ParseDuration(formatted, /*allow_zero=*/true);
  FUZZ_CHECK(again.has_value());
  FUZZ_CHECK(*again == *lenient);
  FUZZ_CHECK(FormatDuration(*again) == formatted);
}

void CheckRfc3339(std::string_view text) {
  const auto parsed = ParseRfc3339(text);
  if (!parsed) {
    return;
  }
  const std::string formatted = FormatRfc3339(*parsed);
  // "YYYY-MM-DDTHH:MM:SSZ": years before 1000 or after 9999 have no such spelling.
  if (formatted.size() != 20) {
    return;
  }
  const auto again = ParseRfc3339(formatted);
  FUZZ_CHECK(again.has_value());
  // FormatRfc3339 drops the fraction the way time_t does: towards zero.
  FUZZ_CHECK(*again ==
             std::chrono::duration_cast<std::chrono::seconds>(*parsed - TimePoint()) + TimePoint());
  FUZZ_CHECK(FormatRfc3339(*again) == formatted);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = certctl::fuzz::AsText(data, size);
  CheckDuration(text);
  CheckRfc3339(text);
  return 0;
}
