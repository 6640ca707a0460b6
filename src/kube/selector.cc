#include "certctl/kube/selector.h"

#include <cctype>
#include <string>
#include <vector>

#include "certctl/kube/names.h"

namespace certctl::kube {
namespace {

bool Alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// A label name or value: at most 63 of [A-Za-z0-9-_.], alphanumeric at both ends.
bool ValidName(std::string_view text) {
  if (text.empty() || text.size() > 63 || !Alnum(text.front()) || !Alnum(text.back())) {
    return false;
  }
  for (char c : text) {
    if (!Alnum(c) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return true;
}

bool ValidKey(std::string_view key) {
  const std::size_t slash = key.find('/');
  if (slash == std::string_view::npos) {
    return ValidName(key);
  }
  return ValidateSubdomainName(key.substr(0, slash)).has_value() &&
         ValidName(key.substr(slash + 1));
}

bool ValidValue(std::string_view value) { return value.empty() || ValidName(value); }

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Status Parse() {
    if (SelectsEverything(text_)) {
      return {};
    }
    for (;;) {
      if (auto requirement = Requirement(); !requirement) {
        return requirement;
      }
      SkipSpaces();
      if (pos_ == text_.size()) {
        return {};
      }
      if (text_[pos_] != ',') {
        return Invalid("expected ',' between requirements");
      }
      ++pos_;
    }
  }

 private:
  void SkipSpaces() {
    while (pos_ < text_.size() && text_[pos_] == ' ') {
      ++pos_;
    }
  }

  // Characters up to the next operator, comma, parenthesis or space.
  std::string_view Word() {
    SkipSpaces();
    const std::size_t start = pos_;
    while (pos_ < text_.size() &&
           std::string_view("=!<>,() ").find(text_[pos_]) == std::string_view::npos) {
      ++pos_;
    }
    return text_.substr(start, pos_ - start);
  }

  tl::unexpected<Error> Invalid(const std::string& what) const {
    return Fail(ErrorCode::kInvalidArgument, "invalid label selector \"" + std::string(text_) +
                                                 "\": " + what + " at offset " +
                                                 std::to_string(pos_));
  }

  Status Key(std::string_view key) {
    if (!ValidKey(key)) {
      return Invalid(key.empty() ? "a key is missing"
                                 : "\"" + std::string(key) + "\" is not a valid label key");
    }
    return {};
  }

  Status Value(std::string_view value) {
    if (!ValidValue(value)) {
      return Invalid("\"" + std::string(value) + "\" is not a valid label value");
    }
    return {};
  }

  Status Requirement() {
    SkipSpaces();
    if (pos_ < text_.size() && text_[pos_] == '!') {
      ++pos_;
      return Key(Word());
    }
    const std::string_view key = Word();
    if (auto valid = Key(key); !valid) {
      return valid;
    }
    SkipSpaces();
    if (pos_ == text_.size() || text_[pos_] == ',') {
      return {};  // exists
    }
    const std::string_view rest = text_.substr(pos_);
    if (rest.starts_with("==") || rest.starts_with("!=")) {
      pos_ += 2;
      return Value(Word());
    }
    if (rest.starts_with("=")) {
      pos_ += 1;
      return Value(Word());
    }
    if (rest.starts_with(">") || rest.starts_with("<")) {
      pos_ += 1;
      const std::string_view number = Word();
      if (number.empty() || number.find_first_not_of("0123456789") != std::string_view::npos) {
        return Invalid("'>' and '<' need a whole number");
      }
      return {};
    }
    const std::string_view op = Word();
    if (op != "in" && op != "notin") {
      return Invalid(op.empty() ? "expected an operator"
                                : "unknown operator \"" + std::string(op) + "\"");
    }
    SkipSpaces();
    if (pos_ == text_.size() || text_[pos_] != '(') {
      return Invalid("expected '(' after " + std::string(op));
    }
    ++pos_;
    for (bool first = true;; first = false) {
      const std::string_view value = Word();
      if (auto valid = Value(value); !valid) {
        return valid;
      }
      SkipSpaces();
      if (pos_ == text_.size()) {
        return Invalid("expected ')'");
      }
      if (text_[pos_] == ')') {
        if (first && value.empty()) {
          return Invalid("the set of values of '" + std::string(op) + "' is empty");
        }
        ++pos_;
        return {};
      }
      if (text_[pos_] != ',') {
        return Invalid("expected ',' or ')' in the set of values");
      }
      ++pos_;
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

Status ValidateLabelSelector(std::string_view selector) { return Parser(selector).Parse(); }

bool SelectsEverything(std::string_view selector) {
  return selector.find_first_not_of(' ') == std::string_view::npos;
}

}  // namespace certctl::kube
