#include "certctl/loop/event_series.h"

#include <utility>

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

// An Event as compact JSON, a fifth of its parsed size: a start that injects 1,000 targets
// keeps 2,000 series for ten minutes.
std::string Compact(const kube::Json& event) {
  std::string text = event.dump();
  text.shrink_to_fit();
  return text;
}

}  // namespace

EventSeries::Write EventSeries::PatchOf(const std::string& key, Series& series, kube::Json event,
                                        MonotonicTime now) {
  series.written = now;
  series.held = false;
  return {key, event["metadata"]["namespace"].get<std::string>(),
          event["metadata"]["name"].get<std::string>(), event,
          kube::Json{{"count", event["count"]},
                     {"message", event["message"]},
                     {"lastTimestamp", event["lastTimestamp"]}}};
}

std::optional<EventSeries::Write> EventSeries::Admit(kube::Json event, MonotonicTime now) {
  const std::string key = SeriesKey(event);
  auto found = series_.find(key);
  if (found != series_.end() && now - found->second.seen >= forget_) {
    series_.erase(found);
    found = series_.end();
  }
  if (found == series_.end()) {
    Series& series = series_[key];
    series.written = series.seen = now;
    series.event = Compact(event);
    std::string ns = event["metadata"]["namespace"].get<std::string>();
    return Write{key, std::move(ns), "", std::move(event)};
  }
  Series& series = found->second;
  series.seen = now;
  kube::Json stands = kube::Json::parse(series.event);
  const bool first_repeat = stands["count"] == 1;
  stands["count"] = stands["count"].get<int>() + 1;
  stands["message"] = event["message"];
  stands["lastTimestamp"] = event["lastTimestamp"];
  series.event = Compact(stands);
  if (first_repeat || now - series.written >= interval_) {
    return PatchOf(key, series, std::move(stands), now);
  }
  series.held = true;
  return std::nullopt;
}

std::vector<EventSeries::Write> EventSeries::Due(MonotonicTime now) {
  std::vector<Write> due;
  for (auto it = series_.begin(); it != series_.end();) {
    Series& series = it->second;
    if (series.held && now - series.written >= interval_) {
      due.push_back(PatchOf(it->first, series, kube::Json::parse(series.event), now));
      ++it;
    } else if (!series.held && now - series.seen >= forget_) {
      it = series_.erase(it);
    } else {
      ++it;
    }
  }
  return due;
}

std::optional<MonotonicTime> EventSeries::NextDue() const {
  std::optional<MonotonicTime> next;
  for (const auto& [key, series] : series_) {
    if (series.held && (!next || series.written + interval_ < *next)) {
      next = series.written + interval_;
    }
  }
  return next;
}

void EventSeries::Recreated(const std::string& key, const std::string& name) {
  if (const auto found = series_.find(key); found != series_.end()) {
    kube::Json event = kube::Json::parse(found->second.event);
    event["metadata"]["name"] = name;
    found->second.event = Compact(event);
  }
}

}  // namespace certctl::loop
