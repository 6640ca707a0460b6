#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace certctl::metrics {

// Label values in the order of the family's label names.
using LabelValues = std::vector<std::string>;

// One metric family: a name, its help text, its label names, and one series per set of
// label values. Thread-safe; series appear on first use and are never removed.
class Family {
 public:
  enum class Type { kCounter, kGauge, kHistogram };

  Family(std::string name, std::string help, Type type, std::vector<std::string> label_names,
         std::vector<double> buckets = {});
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;

  // Counters only go up; a negative amount is ignored.
  void Add(const LabelValues& labels, double amount = 1);
  // Gauges.
  void Set(const LabelValues& labels, double value);
  // Histograms: counts `value` into every bucket whose upper bound is at least `value`.
  void Observe(const LabelValues& labels, double value);

  // The current value of a counter or gauge series (0 when it has never been touched), or
  // a histogram's count: for tests and for readiness logic that mirrors a gauge.
  double Value(const LabelValues& labels) const;

  // Prometheus text exposition (format 0.0.4) of this family: HELP, TYPE, then the series
  // in label order.
  void Render(std::string& out) const;

 private:
  struct Series {
    double value = 0;                   // counter or gauge; histogram sum
    std::vector<std::uint64_t> counts;  // histogram: per bucket, not cumulative
    std::uint64_t count = 0;            // histogram observations
  };
  Series& SeriesFor(const LabelValues& labels);

  const std::string name_;
  const std::string help_;
  const Type type_;
  const std::vector<std::string> label_names_;
  const std::vector<double> buckets_;
  mutable std::mutex mutex_;
  std::map<LabelValues, Series> series_;
};

// The families a process exposes, rendered in registration order.
class Registry {
 public:
  Family& Counter(std::string name, std::string help, std::vector<std::string> label_names = {});
  Family& Gauge(std::string name, std::string help, std::vector<std::string> label_names = {});
  Family& Histogram(std::string name, std::string help, std::vector<std::string> label_names,
                    std::vector<double> buckets);

  std::string Render() const;

 private:
  Family& Add(std::unique_ptr<Family> family);

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Family>> families_;
};

// Formats a sample value as the text format expects: whole numbers in plain digits, others
// in the shortest form that reads back exactly, "+Inf", "-Inf" and "NaN".
std::string FormatValue(double value);

// Escapes a label value (backslash, double quote, newline).
std::string EscapeLabelValue(std::string_view value);

}  // namespace certctl::metrics
