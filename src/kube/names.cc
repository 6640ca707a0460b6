#include "certctl/kube/names.h"

#include <string>

namespace certctl::kube {
namespace {

constexpr std::size_t kMaxSubdomain = 253;
constexpr std::size_t kMaxLabel = 63;

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

tl::unexpected<Error> Invalid(const std::string& why) {
  return Fail(ErrorCode::kInvalidArgument, why);
}

// The first character that no name may hold, as text for a message.
std::string Quoted(char c) {
  if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
    return "a byte that is not printable ASCII";
  }
  return "'" + std::string(1, c) + "'";
}

// One dot-separated part of a subdomain, or a whole label.
Status ValidateLabelPart(std::string_view label) {
  if (label.empty()) {
    return Invalid("it has an empty part (a leading, trailing or doubled '.')");
  }
  for (const char c : label) {
    if (!IsLowerAlnum(c) && c != '-') {
      return Invalid("it contains " + Quoted(c));
    }
  }
  if (label.front() == '-' || label.back() == '-') {
    return Invalid("a part starts or ends with '-'");
  }
  return {};
}

}  // namespace

Status ValidateSubdomainName(std::string_view name) {
  if (name.empty()) {
    return Invalid("it is empty");
  }
  if (name.size() > kMaxSubdomain) {
    return Invalid("it is " + std::to_string(name.size()) + " characters long");
  }
  for (const char c : name) {
    if (!IsLowerAlnum(c) && c != '-' && c != '.') {
      return Invalid("it contains " + Quoted(c));
    }
  }
  for (std::size_t start = 0;;) {
    const std::size_t dot = name.find('.', start);
    if (auto part = ValidateLabelPart(name.substr(start, dot - start)); !part) {
      return part;
    }
    if (dot == std::string_view::npos) {
      return {};
    }
    start = dot + 1;
  }
}

Status ValidateLabelName(std::string_view name) {
  if (name.empty()) {
    return Invalid("it is empty");
  }
  if (name.size() > kMaxLabel) {
    return Invalid("it is " + std::to_string(name.size()) + " characters long");
  }
  return ValidateLabelPart(name);
}

}  // namespace certctl::kube
