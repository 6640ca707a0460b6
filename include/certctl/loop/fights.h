#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "certctl/controller/targets.h"
#include "certctl/kube/client.h"
#include "certctl/loop/damping.h"
#include "certctl/loop/log.h"
#include "certctl/loop/pass.h"
#include "certctl/metrics/registry.h"
#include "certctl/util/clock.h"

namespace certctl::loop {

inline constexpr char kCaBundleField[] = "caBundle";
inline constexpr char kFailurePolicyField[] = "failurePolicy";

// The field manager other than certctl that last wrote `field` in `object`; empty when the
// server keeps no managedFields or only certctl wrote it.
std::string OtherWriter(const kube::Json& object, std::string_view field);

// Writers that keep undoing what certctl wrote (a caBundle, a failurePolicy, a key of a
// Secret), as the sidecar and `certctl controller` meet them alike: the one RepairDamper of
// every such field, which of a pass's writes were repairs of another writer's change, and how
// a fight is told (a log line, one Warning Event series naming the writer, the metric
// certctl_overwrites_total). Objects are keyed by "kind/name" (a Secret's "secret/ns/name"),
// so one Fights serves any number of Secrets and targets. Not thread-safe: one caller at a
// time.
class Fights {
 public:
  struct Telling {
    LogSink log;
    std::function<void(kube::Json event)> event;  // a Warning Event, for the caller to fold
    metrics::Family* overwrites = nullptr;        // {object, field}
    std::string instance;                         // the Events' reporter
  };
  // A repair of fields another writer changed after certctl wrote them.
  struct Overwrite {
    std::string object;               // "validatingwebhookconfiguration/x", "secret/ns/name"
    std::vector<std::string> fields;  // "caBundle"; "failurePolicy"; "tls.crt", "ca.crt"
    std::string reason;               // of its Warning Event: "CABundleOverwritten"
    controller::ObjectReference reference;
    kube::Json as_read;  // the object before the repair: its managedFields name the writer
  };

  Fights(const Clock& clock, Telling telling, RepairPolicy policy = {});

  // PassConfig::hold_back: a repair of `target`'s caBundle waits while another writer fights
  // over it; certctl's own next bundle for a target that still holds its last one does not (a
  // CA rotation's step must not wait out the memory of a fight).
  bool HoldsBackTarget(const std::string& object, const controller::TargetObject& target);
  // PassConfig::secret_hold_back for the Secret `object`: the same, key by key. A repair that
  // goes ahead is told once the pass wrote it (NoteRepairs).
  bool HoldsBackSecret(const std::string& object, const kube::Json& secret);
  // A pass over the Secret `object` begins: nothing found by an earlier one is pending.
  void BeginPass(const std::string& object);
  // After a leader's pass over the Secret `ns`/`name`: the repairs it made of other writers'
  // changes are counted and told, and what it wrote is remembered.
  void NoteRepairs(const PassReport& report, const std::string& ns, const std::string& name);

  // The parts, for fields a pass does not write (failurePolicy, written once ready):
  bool Overwritten(const std::string& object, const std::string& field,
                   const std::string& value_now) const {
    return damper_.Overwritten(object, field, value_now);
  }
  // An overwrite by `writer` was found: true while its repair must wait.
  bool Damps(const std::string& object, const std::string& writer);
  void Wrote(const std::string& object, const std::string& field, std::string value) {
    damper_.Wrote(object, field, std::move(value));
  }
  // Counts a repair of another writer's change and, once the fight is contested, tells it.
  void Note(const Overwrite& overwrite);
  // Fail on the entries of `targets` with Ignore that the API server can call, because the
  // Secret `secret_object` they trust is ready (--failure-policy-once-ready, or the annotation
  // certctl.io/failure-policy-once-ready): an entry set back to Ignore after certctl closed it
  // is a repair like any other, held while its configuration is fought over. Each
  // configuration written gets a FailurePolicySet Event through Telling::event.
  struct Closing {
    bool held_back = false;            // a configuration set back to Ignore waits
    std::string kept_because;          // why entries keep Ignore; empty: none do
    std::vector<std::string> patched;  // configurations written, "kind/name"
    std::string failure;               // a read or write that failed, for the caller's log
  };
  Closing CloseFailurePolicies(kube::Client& client,
                               const std::vector<controller::TargetObject>& targets,
                               const std::string& secret_object);

  // The earliest moment a held repair may go (nullopt: none is held).
  std::optional<MonotonicTime> NextRelease() const {
    return damper_.NextRelease(clock_.Monotonic());
  }

 private:
  const Clock& clock_;
  Telling telling_;
  RepairDamper damper_;
  std::map<std::string, Overwrite> pending_;  // by Secret: found while its pass ran
};

}  // namespace certctl::loop
