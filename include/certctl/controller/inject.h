#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "certctl/controller/check.h"
#include "certctl/controller/targets.h"
#include "certctl/kube/client.h"
#include "certctl/util/clock.h"
#include "certctl/util/result.h"

namespace certctl::controller {

struct InjectOptions {
  // How long to wait for targets that do not exist yet (and for a selector to match).
  std::chrono::seconds wait_for_targets{120};
  // When set, the wait ends here instead (a job's one deadline for all its work).
  std::optional<TimePoint> deadline;
  std::chrono::milliseconds poll_interval{1000};
  // Told when the wait for missing targets begins and every waiting_note_interval while it
  // lasts (a hook Job is otherwise silent until its deadline): one line naming them.
  std::function<void(const std::string& line)> on_waiting;
  std::chrono::seconds waiting_note_interval{10};
  // Inject what exists and list the rest in InjectOutcome::missing instead of waiting for it
  // (a pre-upgrade hook: targets the upgrade adds or renames exist only after it).
  bool leave_out_missing = false;
  // Objects ("kind/name", as read) not to write now although their bundle differs; they are
  // listed in InjectOutcome::held_back instead (the sidecar spaces out repairs another writer
  // undoes).
  std::function<bool(const std::string& object, const TargetObject& target)> hold_back;
};

struct InjectOutcome {
  int objects = 0;                                  // target objects seen
  int slots = 0;                                    // caBundle fields in them
  int patched_objects = 0;                          // objects written
  int patched_slots = 0;                            // caBundle fields changed
  std::vector<std::string> patched;                 // "validatingwebhookconfiguration/x", ...
  std::vector<ObjectReference> patched_references;  // the same objects, for Events
  std::vector<std::string> missing;    // left out (leave_out_missing): objects, selectors
  std::vector<std::string> held_back;  // not written (hold_back), another bundle left in place
  // Every target found, as read before its caBundle was written: what its entries call.
  std::vector<TargetObject> targets;
};

// Puts `bundle_pem` into every caBundle of every selected target, writing only objects whose
// bundle differs (zero writes when all match). Writes are JSON patches that touch nothing but
// caBundle fields and are pinned to the webhook entries they mean; when the object changed
// underneath (the server rejects the patch, or it conflicts) it is re-read and the patch
// recomputed. Targets that do not exist yet are waited for up to wait_for_targets; after
// that, kNotFound naming every one still missing (with leave_out_missing: listed in the
// outcome at once, the others injected).
Result<InjectOutcome> InjectBundle(kube::Client& client, const TargetSelection& selection,
                                   const std::string& bundle_pem, const InjectOptions& options,
                                   const Clock& clock);

}  // namespace certctl::controller
