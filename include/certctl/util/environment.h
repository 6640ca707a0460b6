#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace certctl {

// Environment variables are a dependency like time: configuration code asks this seam,
// so tests can describe an in-cluster pod or a laptop without touching the real process.
class Environment {
 public:
  virtual ~Environment() = default;
  // Empty optional when unset; an empty string when set to "".
  virtual std::optional<std::string> Get(std::string_view name) const = 0;
};

class SystemEnvironment final : public Environment {
 public:
  std::optional<std::string> Get(std::string_view name) const override;
};

class MapEnvironment final : public Environment {
 public:
  explicit MapEnvironment(std::map<std::string, std::string, std::less<>> values = {})
      : values_(std::move(values)) {}
  std::optional<std::string> Get(std::string_view name) const override {
    auto it = values_.find(name);
    return it == values_.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  void Set(std::string name, std::string value) { values_[std::move(name)] = std::move(value); }

 private:
  std::map<std::string, std::string, std::less<>> values_;
};

}  // namespace certctl
