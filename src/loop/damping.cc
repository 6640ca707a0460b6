#include "certctl/loop/damping.h"

#include <algorithm>

namespace certctl::loop {

void RepairDamper::Wrote(const std::string& object, const std::string& field, std::string value) {
  written_[{object, field}] = std::move(value);
}

bool RepairDamper::Overwritten(const std::string& object, const std::string& field,
                               const std::string& value_now) const {
  const auto found = written_.find({object, field});
  return found != written_.end() && found->second != value_now;
}

void RepairDamper::Sighted(const std::string& object, const std::string& writer,
                           MonotonicTime now) {
  const auto [found, first] = rows_.try_emplace(object);
  Row& row = found->second;
  if (row.sighted) {
    return;  // the same change, found again by a later pass while its repair waits
  }
  const bool another_writer = !writer.empty() && !row.writer.empty() && writer != row.writer;
  if (first || now - row.last > policy_.quiet || another_writer) {
    row.repairs = 0;
  }
  if (!writer.empty()) {
    row.writer = writer;
  }
  row.sighted = true;
}

int RepairDamper::Repaired(const std::string& object, MonotonicTime now) {
  // Rows long past any hold are forgotten, so the map holds only objects being fought over.
  std::erase_if(rows_, [&](const auto& entry) {
    return entry.first != object && now - entry.second.last > policy_.quiet + policy_.max_delay;
  });
  Row& row = rows_[object];
  row.repairs += 1;
  row.last = now;
  row.sighted = false;
  row.recent.push_back(now);
  while (std::ssize(row.recent) > policy_.max_per_minute) {
    row.recent.pop_front();
  }
  return row.repairs;
}

std::optional<MonotonicTime> RepairDamper::HoldEnd(const Row& row) const {
  std::optional<MonotonicTime> end;
  if (std::ssize(row.recent) >= policy_.max_per_minute) {
    end = row.recent.front() + std::chrono::minutes(1);
  }
  if (row.repairs < policy_.free_repairs) {
    return end;
  }
  // 1 s after the last free repair, then 2 s, 4 s, ... up to max_delay.
  const int doublings = std::min(row.repairs - policy_.free_repairs, 30);
  const auto delay =
      std::min(policy_.first_delay * (std::int64_t{1} << doublings),
               std::chrono::duration_cast<std::chrono::milliseconds>(policy_.max_delay));
  return std::max(end.value_or(row.last), row.last + delay);
}

std::optional<MonotonicTime> RepairDamper::HeldUntil(const std::string& object,
                                                     MonotonicTime now) const {
  const auto found = rows_.find(object);
  if (found == rows_.end()) {
    return std::nullopt;
  }
  auto end = HoldEnd(found->second);
  return end && now < *end ? end : std::nullopt;
}

std::optional<MonotonicTime> RepairDamper::NextRelease(MonotonicTime now) const {
  std::optional<MonotonicTime> next;
  for (const auto& [object, row] : rows_) {
    if (auto end = HeldUntil(object, now); end && (!next || *end < *next)) {
      next = end;
    }
  }
  return next;
}

bool RepairDamper::Contested(const std::string& object) const {
  const auto found = rows_.find(object);
  return found != rows_.end() && found->second.repairs >= policy_.free_repairs;
}

}  // namespace certctl::loop
