#include "certctl/loop/event_series.h"

namespace certctl::loop {
namespace {

std::string SeriesKey(const kube::Json& event) {
  const kube::Json& about = event["involvedObject"];
  const auto field = [](const kube::Json& object, const char* name) {
    const auto found = object.find(name);
    return found != object.end() && found->is_string() ? found->get<std::string>() : "";
  };
  return field(event, "type") + '\n' + field(event, "reason") + '\n' + field(about, "kind") + '\n' +
         field(about, "namespace") + '\n' + field(about, "name");
}

}  // namespace

std::optional<kube::Json> EventSeries::Admit(kube::Json event, MonotonicTime now) {
  const auto [found, first] = series_.try_emplace(SeriesKey(event));
  Series& series = found->second;
  if (first || (!series.held && now - series.recorded >= interval_)) {
    series.recorded = now;
    return event;
  }
  if (series.held) {
    // The fold keeps the first repeat's name and firstTimestamp and takes the latest words.
    kube::Json& held = *series.held;
    held["count"] = held["count"].get<int>() + 1;
    held["message"] = event["message"];
    held["lastTimestamp"] = event["lastTimestamp"];
  } else {
    series.held = std::move(event);
  }
  return std::nullopt;
}

std::vector<kube::Json> EventSeries::Due(MonotonicTime now) {
  std::vector<kube::Json> due;
  for (auto it = series_.begin(); it != series_.end();) {
    Series& series = it->second;
    if (now - series.recorded < interval_) {
      ++it;
    } else if (series.held) {
      due.push_back(std::move(*series.held));
      series.held.reset();
      series.recorded = now;
      ++it;
    } else {
      it = series_.erase(it);  // quiet for a whole interval: the next one starts anew
    }
  }
  return due;
}

std::optional<MonotonicTime> EventSeries::NextDue() const {
  std::optional<MonotonicTime> next;
  for (const auto& [key, series] : series_) {
    if (series.held && (!next || series.recorded + interval_ < *next)) {
      next = series.recorded + interval_;
    }
  }
  return next;
}

}  // namespace certctl::loop
