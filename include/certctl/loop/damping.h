#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "certctl/util/clock.h"

namespace certctl::loop {

// How repairs of one object are spaced out once another writer keeps undoing them.
struct RepairPolicy {
  int free_repairs = 3;                         // repairs in a row that go at once
  std::chrono::milliseconds first_delay{1000};  // then doubling, after the free ones
  std::chrono::milliseconds max_delay{60000};
  // An overwrite found this long after the last repair starts a new row: the fight was over.
  std::chrono::milliseconds quiet{30000};
  // Whatever starts a new row, never more repairs of one object than this in a minute: two
  // writers taking turns do not make every change a first one.
  int max_per_minute = 12;
};

// The one damping of every field certctl keeps in an object another writer can change: a
// target's caBundle, a webhook configuration's failurePolicy, each key of the Secret. It
// remembers what this replica last wrote into each field, to tell its own next write (a
// renewal, a rotation step: never held) from a repair of what another writer changed; and it
// counts repairs per object, to tell a single change (repaired at once) from a writer
// fighting certctl (repaired ever more slowly, so the two do not trade writes as fast as the
// API server takes them). Objects are keyed by their "kind/name"; an object's fields share
// its row, so a fight over two of them is no faster. Not thread-safe: the loop's.
class RepairDamper {
 public:
  explicit RepairDamper(RepairPolicy policy = {}) : policy_(policy) {}

  // This replica wrote `value` into `field` of `object` ("caBundle", "failurePolicy",
  // "tls.crt"), or found it there after its write.
  void Wrote(const std::string& object, const std::string& field, std::string value);
  // Whether `field` of `object` holds `value_now` although this replica last wrote something
  // else there: another writer changed it. False for a field this replica never wrote.
  bool Overwritten(const std::string& object, const std::string& field,
                   const std::string& value_now) const;
  // An overwrite of `object` by `writer` (its field manager; empty when unknown) was found at
  // `now`; only the first finding after a repair counts. It starts a new row when the last
  // repair is `quiet` ago or another writer made the change, so a single write after a fight,
  // or by someone else, is repaired at once.
  void Sighted(const std::string& object, const std::string& writer, MonotonicTime now);
  // Whether a repair of `object` must wait now (HeldUntil, shorter to call).
  bool HoldsBack(const std::string& object, MonotonicTime now) const {
    return HeldUntil(object, now).has_value();
  }

  // Records that `object` was repaired at `now`; returns how many repairs in a row that makes
  // (1 after a quiet period or another writer's change).
  int Repaired(const std::string& object, MonotonicTime now);
  // Until when `object` must not be repaired (nullopt: at once).
  std::optional<MonotonicTime> HeldUntil(const std::string& object, MonotonicTime now) const;
  // The earliest moment a held object may be repaired again (nullopt: none is held).
  std::optional<MonotonicTime> NextRelease(MonotonicTime now) const;
  // Whether `object`'s repairs in a row show another writer: its next repair is held.
  bool Contested(const std::string& object) const;

 private:
  struct Row {
    MonotonicTime last;  // the last repair
    int repairs = 0;
    std::string writer;                // whose change the row is about
    bool sighted = false;              // an overwrite was found since the last repair
    std::deque<MonotonicTime> recent;  // the last max_per_minute repairs, rows or not
  };
  std::optional<MonotonicTime> HoldEnd(const Row& row) const;

  RepairPolicy policy_;
  std::map<std::string, Row> rows_;
  std::map<std::pair<std::string, std::string>, std::string> written_;  // (object, field)
};

}  // namespace certctl::loop
