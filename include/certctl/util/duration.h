#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "certctl/util/clock.h"
#include "certctl/util/result.h"

namespace certctl {

using Days = std::chrono::duration<std::int64_t, std::ratio<86400>>;
using Years = std::chrono::duration<std::int64_t, std::ratio<365 * 86400>>;

// The longest duration certctl accepts anywhere: 100 years. It keeps every `now + d`, and even
// `now + d1 + d2`, far inside what X.509 GeneralizedTime (year 9999) and a nanosecond
// std::chrono time point (year 2262) can hold.
inline constexpr std::chrono::seconds kMaxDuration = Years(100);

// Parses "720h", "30d", "10y", "1h30m", "90s". Units: s, m, h, d (24h), y (365d). Units it
// does not take (ms, us, ns, w, M, mo) are refused by name, saying what to write instead.
// Every number needs a unit; the total must be positive unless allow_zero, and at most
// kMaxDuration (kInvalidArgument naming the maximum otherwise).
Result<std::chrono::seconds> ParseDuration(std::string_view text, bool allow_zero = false);

// A warning for a duration that parses but likely means something else: minutes right after
// years or days ("1y6m" is a year and six minutes, not eighteen months). Nullopt otherwise.
std::optional<std::string> DurationAmbiguity(std::string_view text);

// The shortest exact spelling in the same units: 86400s -> "1d", 5400s -> "1h30m".
std::string FormatDuration(std::chrono::seconds duration);

// RFC 3339 in UTC with second precision: "2026-11-22T07:42:33Z".
std::string FormatRfc3339(TimePoint time);

// Parses what FormatRfc3339 writes, plus fractional seconds and numeric offsets. Times a
// TimePoint cannot hold (before 1677-09-21, after 2262-04-11) saturate at its first or last
// whole second.
Result<TimePoint> ParseRfc3339(std::string_view text);

}  // namespace certctl
