#include "certctl/metrics/registry.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <stdexcept>

namespace certctl::metrics {
namespace {

std::string_view TypeName(Family::Type type) {
  switch (type) {
    case Family::Type::kCounter:
      return "counter";
    case Family::Type::kGauge:
      return "gauge";
    case Family::Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// The text format escapes backslash and newline, and in label values the double quote too.
std::string Escape(std::string_view text, bool quotes) {
  std::string escaped;
  for (const char c : text) {
    if (c == '\\') {
      escaped += "\\\\";
    } else if (c == '\n') {
      escaped += "\\n";
    } else if (c == '"' && quotes) {
      escaped += "\\\"";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

void AppendLabels(std::string& out, const std::vector<std::string>& names,
                  const LabelValues& values, std::string_view extra_name = {},
                  std::string_view extra_value = {}) {
  if (names.empty() && extra_name.empty()) {
    return;
  }
  out += '{';
  bool first = true;
  const auto append = [&](std::string_view name, std::string_view value) {
    if (!first) {
      out += ',';
    }
    first = false;
    out += name;
    out += "=\"";
    out += EscapeLabelValue(value);
    out += '"';
  };
  for (std::size_t i = 0; i < names.size(); ++i) {
    append(names[i], values[i]);
  }
  if (!extra_name.empty()) {
    append(extra_name, extra_value);
  }
  out += '}';
}

}  // namespace

std::string FormatValue(double value) {
  if (std::isnan(value)) {
    return "NaN";
  }
  if (std::isinf(value)) {
    return value > 0 ? "+Inf" : "-Inf";
  }
  // Whole numbers (counts, unix timestamps) in plain digits, not "1.7e+09".
  constexpr double kExactIntegers = 9007199254740992.0;  // 2^53
  if (value == std::trunc(value) && std::fabs(value) < kExactIntegers) {
    return std::to_string(static_cast<std::int64_t>(value));
  }
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

std::string EscapeLabelValue(std::string_view value) { return Escape(value, /*quotes=*/true); }

Family::Family(std::string name, std::string help, Type type, std::vector<std::string> label_names,
               std::vector<double> buckets)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      label_names_(std::move(label_names)),
      buckets_(std::move(buckets)) {}

Family::Series& Family::SeriesFor(const LabelValues& labels) {
  // A wrong label count is a programming error in certctl itself, caught by its tests.
  if (labels.size() != label_names_.size()) {
    throw std::logic_error("metric " + name_ + ": wrong number of label values");
  }
  auto [it, inserted] = series_.try_emplace(labels);
  if (inserted && type_ == Type::kHistogram) {
    it->second.counts.assign(buckets_.size(), 0);
  }
  return it->second;
}

void Family::Add(const LabelValues& labels, double amount) {
  if (amount < 0) {
    return;
  }
  const std::lock_guard lock(mutex_);
  SeriesFor(labels).value += amount;
}

void Family::Set(const LabelValues& labels, double value) {
  const std::lock_guard lock(mutex_);
  SeriesFor(labels).value = value;
}

void Family::Observe(const LabelValues& labels, double value) {
  const std::lock_guard lock(mutex_);
  Series& series = SeriesFor(labels);
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    if (value <= buckets_[i]) {
      ++series.counts[i];
      break;
    }
  }
  ++series.count;
  series.value += value;
}

double Family::Value(const LabelValues& labels) const {
  const std::lock_guard lock(mutex_);
  const auto it = series_.find(labels);
  if (it == series_.end()) {
    return 0;
  }
  return type_ == Type::kHistogram ? static_cast<double>(it->second.count) : it->second.value;
}

void Family::Render(std::string& out) const {
  const std::lock_guard lock(mutex_);
  out += "# HELP " + name_ + " " + Escape(help_, /*quotes=*/false) + "\n";
  out += "# TYPE " + name_ + " " + std::string(TypeName(type_)) + "\n";
  for (const auto& [labels, series] : series_) {
    if (type_ != Type::kHistogram) {
      out += name_;
      AppendLabels(out, label_names_, labels);
      out += " " + FormatValue(series.value) + "\n";
      continue;
    }
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i <= buckets_.size(); ++i) {
      cumulative = i < buckets_.size() ? cumulative + series.counts[i] : series.count;
      out += name_ + "_bucket";
      AppendLabels(out, label_names_, labels, "le",
                   i < buckets_.size() ? FormatValue(buckets_[i]) : "+Inf");
      out += " " + std::to_string(cumulative) + "\n";
    }
    out += name_ + "_sum";
    AppendLabels(out, label_names_, labels);
    out += " " + FormatValue(series.value) + "\n";
    out += name_ + "_count";
    AppendLabels(out, label_names_, labels);
    out += " " + std::to_string(series.count) + "\n";
  }
}

Family& Registry::Add(std::unique_ptr<Family> family) {
  const std::lock_guard lock(mutex_);
  families_.push_back(std::move(family));
  return *families_.back();
}

Family& Registry::Counter(std::string name, std::string help,
                          std::vector<std::string> label_names) {
  return Add(std::make_unique<Family>(std::move(name), std::move(help), Family::Type::kCounter,
                                      std::move(label_names)));
}

Family& Registry::Gauge(std::string name, std::string help, std::vector<std::string> label_names) {
  return Add(std::make_unique<Family>(std::move(name), std::move(help), Family::Type::kGauge,
                                      std::move(label_names)));
}

Family& Registry::Histogram(std::string name, std::string help,
                            std::vector<std::string> label_names, std::vector<double> buckets) {
  return Add(std::make_unique<Family>(std::move(name), std::move(help), Family::Type::kHistogram,
                                      std::move(label_names), std::move(buckets)));
}

std::string Registry::Render() const {
  const std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& family : families_) {
    family->Render(out);
  }
  return out;
}

}  // namespace certctl::metrics
