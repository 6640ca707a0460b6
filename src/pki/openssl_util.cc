#include "pki/openssl_util.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <ctime>

#include <openssl/err.h>

namespace certctl::pki::internal {
namespace {

constexpr std::string_view kBegin = "-----BEGIN ";
constexpr std::string_view kDashes = "-----";

bool IsBlank(std::string_view text) {
  return text.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

bool IsBinary(std::string_view text) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte == 0 || byte == 0x7f || (byte < 0x20 && c != '\t' && c != '\r' && c != '\n')) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string OpensslErrors() {
  std::vector<std::string> reasons;
  char buffer[256];
  unsigned long code = 0;
  while ((code = ERR_get_error()) != 0) {
    // The reason alone reads better than the full "error:1E08010C:DECODER routines::..."
    // triplet; fall back to the full string when OpenSSL has no reason text for it.
    const char* reason = ERR_reason_error_string(code);
    if (reason == nullptr) {
      ERR_error_string_n(code, buffer, sizeof(buffer));
      reason = buffer;
    }
    // Wrappers that every ASN.1 failure repeats say nothing about the cause.
    const std::string_view text(reason);
    if (text == "nested asn1 error" || text == "ASN1 lib") {
      continue;
    }
    if (std::find(reasons.begin(), reasons.end(), text) == reasons.end()) {
      reasons.emplace_back(text);
    }
  }
  // The decoders add "unsupported" whenever none of them took the input; a specific reason
  // next to it is the one that helps.
  if (reasons.size() > 1) {
    std::erase(reasons, "unsupported");
  }
  std::string out;
  for (const std::string& reason : reasons) {
    out += out.empty() ? "" : "; ";
    out += reason;
  }
  return out;
}

Error OpensslError(std::string_view what, ErrorCode code) {
  std::string message(what);
  const std::string errors = OpensslErrors();
  if (!errors.empty()) {
    message += ": ";
    message += errors;
  }
  return Error(code, std::move(message));
}

Result<BioPtr> ReadBio(std::string_view data) {
  if (data.size() > static_cast<std::size_t>(INT_MAX)) {
    return Fail(ErrorCode::kInvalidArgument, "input too large");
  }
  BioPtr bio(BIO_new_mem_buf(data.data(), static_cast<int>(data.size())));
  if (!bio) {
    return Fail(OpensslError("cannot create memory BIO"));
  }
  return bio;
}

Result<BioPtr> WriteBio() {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio) {
    return Fail(OpensslError("cannot create memory BIO"));
  }
  return bio;
}

std::string BioContents(BIO* bio) {
  char* data = nullptr;
  const long length = BIO_get_mem_data(bio, &data);
  if (length <= 0 || data == nullptr) {
    return {};
  }
  return std::string(data, static_cast<std::size_t>(length));
}

Result<std::vector<PemBlock>> ScanPem(std::string_view input, std::string_view what) {
  const std::string expected = "expected a PEM " + std::string(what);
  if (IsBlank(input)) {
    return Fail(ErrorCode::kInvalidArgument, "empty input, " + expected);
  }
  std::vector<PemBlock> blocks;
  std::size_t pos = 0;
  while ((pos = input.find(kBegin, pos)) != std::string_view::npos) {
    const std::size_t label_start = pos + kBegin.size();
    const std::size_t label_end = input.find(kDashes, label_start);
    const std::size_t line_end = input.find('\n', label_start);
    if (label_end == std::string_view::npos ||
        (line_end != std::string_view::npos && line_end < label_end)) {
      return Fail(ErrorCode::kInvalidArgument, "truncated PEM: damaged BEGIN line, " + expected);
    }
    std::string label(input.substr(label_start, label_end - label_start));
    const std::string end_marker = "-----END " + label + "-----";
    const std::size_t end = input.find(end_marker, label_end);
    if (end == std::string_view::npos) {
      return Fail(ErrorCode::kInvalidArgument,
                  "truncated PEM: the " + label + " block has no END line");
    }
    std::size_t block_end = end + end_marker.size();
    if (block_end < input.size() && input[block_end] == '\r') {
      ++block_end;
    }
    if (block_end < input.size() && input[block_end] == '\n') {
      ++block_end;
    }
    blocks.push_back(PemBlock{std::move(label), input.substr(pos, block_end - pos)});
    pos = block_end;
  }
  if (blocks.empty()) {
    if (!input.empty() && static_cast<unsigned char>(input.front()) == 0x30 && IsBinary(input)) {
      return Fail(ErrorCode::kInvalidArgument, "input looks like DER, " + expected);
    }
    if (IsBinary(input)) {
      return Fail(ErrorCode::kInvalidArgument, "input is binary data, " + expected);
    }
    return Fail(ErrorCode::kInvalidArgument, "no PEM block found, " + expected);
  }
  return blocks;
}

Result<TimePoint> ToTimePoint(const ASN1_TIME* time) {
  if (time == nullptr) {
    return Fail(ErrorCode::kInvalidArgument, "certificate has no validity time");
  }
  std::tm parts{};
  // ASN1_TIME_to_tm reads the current time when given null; `time` is never null here.
  if (ASN1_TIME_to_tm(time, &parts) != 1) {
    return Fail(OpensslError("malformed certificate validity time", ErrorCode::kInvalidArgument));
  }
  const std::time_t seconds = timegm(&parts);
  // GeneralizedTime reaches the year 9999 (99991231235959Z is RFC 5280's "no expiry"), a
  // nanosecond TimePoint only 1677 to 2262: saturate instead of overflowing.
  const auto earliest = std::chrono::ceil<std::chrono::seconds>(TimePoint::min());
  const auto latest = std::chrono::floor<std::chrono::seconds>(TimePoint::max());
  if (seconds < earliest.time_since_epoch().count()) {
    return TimePoint(earliest);
  }
  if (seconds > latest.time_since_epoch().count()) {
    return TimePoint(latest);
  }
  return std::chrono::system_clock::from_time_t(seconds);
}

Result<Asn1TimePtr> ToAsn1Time(TimePoint time) {
  const std::time_t seconds =
      std::chrono::system_clock::to_time_t(std::chrono::floor<std::chrono::seconds>(time));
  // UTCTime until 2049, GeneralizedTime from 2050 on, as RFC 5280 requires.
  Asn1TimePtr out(ASN1_TIME_set(nullptr, seconds));
  if (!out) {
    return Fail(OpensslError("cannot encode certificate time", ErrorCode::kInvalidArgument));
  }
  return out;
}

}  // namespace certctl::pki::internal
