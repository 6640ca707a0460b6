#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "certctl/controller/check.h"
#include "certctl/controller/ensure_secret.h"
#include "certctl/controller/inject.h"
#include "certctl/kube/client.h"
#include "certctl/util/clock.h"
#include "certctl/util/finding.h"
#include "certctl/util/result.h"

namespace certctl::loop {

struct PassConfig {
  controller::SecretSpec secret;
  controller::TargetSelection targets;
  std::filesystem::path cert_dir;  // empty: no folder to keep
  // Targets ("kind/name", as read) whose repair waits: another writer keeps undoing it.
  std::function<bool(const std::string& object, const controller::TargetObject& target)> hold_back;
  // The same for the Secret (the leader's writes to it but its creation).
  controller::SecretHoldBack secret_hold_back;
  // Since when every target holds `bundle` (`written`: this pass had to write some first),
  // remembered across the leader's passes: a CA rotation's step 2 waits
  // controller::kBundlePropagation from then. Empty: since now, every time (step 2 waits on).
  std::function<TimePoint(const std::string& bundle, bool written)> bundle_held_since;
};

// The memory behind PassConfig::bundle_held_since.
class BundleHold {
 public:
  TimePoint Since(const std::string& bundle, bool written, TimePoint now);

 private:
  std::string bundle_;
  TimePoint since_{};
};

// Whether this replica may write to the cluster: the leader (or the only replica) does;
// a follower only reads, keeps its own folder in sync and judges readiness.
enum class Role { kLeader, kFollower };

// One write to the Secret.
struct SecretChange {
  controller::SecretAction action = controller::SecretAction::kNone;
  std::string reason;  // why
  std::string uid;     // the Secret's, for Events about it
};

// What one pass found and did.
struct PassReport {
  // The `certificate` check: the Secret holds a pair that serves (due for renewal still
  // does: renewing it is the leader's), and the folder (if any) serves it, or still holds
  // a set the Secret's CA bundle trusts when the folder cannot be written.
  bool ready = false;
  std::string not_ready;  // why not, on one line; empty when ready
  // The `injected` check: every target's caBundle holds the CA bundle of the Secret.
  bool injected = false;
  std::string not_injected;  // why not, on one line; empty when injected
  // The folder could not take the Secret's set but serves one that still works: why.
  std::string folder_stale;
  // A follower serves a pair that lacks names its own flags add (the leader's flags differ,
  // as in a rolling update): which, on one line.
  std::string names_awaited;
  // The Secret's writes, in order: a CA rotation can take steps 1 and 2 in one pass.
  std::vector<SecretChange> secret_changes;
  // Webhooks outside the targets that call names a re-issued leaf dropped, trusting the
  // Secret's CA: they fail now. Told, not refused: a controller must not wedge on them.
  std::vector<controller::OtherCaller> other_callers;
  // Why they could not be looked for when a leaf dropped names (kPermissionDenied: certctl
  // may not list webhook configurations).
  std::optional<Error> other_callers_not_looked;
  controller::RotationPhase rotation = controller::RotationPhase::kNone;  // as now stored
  // Rotation annotations found ignored or clamped (the leader wrote them back corrected).
  std::vector<controller::RotationProblem> rotation_problems;
  // When the next pass is due without a change to trigger it: a CA rotation's next step, the
  // end of a wait for requested names.
  std::optional<TimePoint> next_step_at;
  bool folder_written = false;       // the folder got a new set
  std::vector<std::string> patched;  // targets whose caBundle was repaired
  std::vector<controller::ObjectReference> patched_references;  // the same, for Events
  // Objects left unrepaired for now (PassConfig::hold_back, secret_hold_back): "kind/name".
  std::vector<std::string> held_back;
  // The Secret's data as the pass last wrote it (base64, by key); empty when it wrote none.
  std::map<std::string, std::string> secret_data;
  std::string injected_bundle;            // what the leader put into the targets (decoded PEM)
  std::optional<TimePoint> ca_not_after;  // of the CA that issued the leaf
  std::optional<TimePoint> leaf_not_after;
  std::optional<TimePoint> ca_not_before;  // with notAfter, the lifetime
  std::optional<TimePoint> leaf_not_before;
  // What the API server would find calling the targets (SPEC 4a): entries whose called name
  // the leaf does not cover, or that name nothing callable. Judged whenever the targets were
  // read (nullopt: they were not); readiness fails on them apart from `ready`, which is
  // about the certificate.
  std::optional<std::vector<Finding>> call_findings;
  // The leader's targets as last read, for what follows a ready pass (failurePolicy).
  std::vector<controller::TargetObject> targets;
  // When ready: the distinct caBundles the targets hold (decoded PEM), what the API server
  // will trust when it calls the webhook; while not injected, the Secret's own CA bundle
  // (what the leader is putting there).
  std::vector<std::string> target_bundles;
  // Another certctl instance manages the Secret under other settings (controller/issuer.h).
  std::optional<controller::ConfigurationConflict> conflict;
  std::string secret_uid;      // the Secret's metadata.uid as last read or written, for Events
  bool secret_managed = true;  // false: a Secret certctl does not manage, left as it is
  // Set when a step failed after the pass wrote something (the Secret, a target): the pass
  // failed, but what it wrote is in this report to be told.
  std::optional<Error> failure;
};

// One reconcile: the same logic as `certctl job`, once, without waiting.
//  - leader: EnsureSecret, then the folder, then the bundle into every target; a target
//    that does not exist yet (or a selector that matches nothing) makes the pass not ready,
//    not failed: its appearance triggers the next pass. A CA rotation waiting for the targets
//    moves the leaf to the new CA (and the folder with it) once each reads back the bundle;
//  - follower: reads the Secret and the targets and writes only its folder; an absent or
//    invalid Secret is not ready, a target without the bundle not injected, waiting for the
//    leader.
// Errors are failures a retry may fix (API, file system) or that need a human (an invalid
// Secret certctl does not manage); nothing is half-written by them. A failure after the pass
// wrote something is a report with `failure` set, so what was written is still told.
Result<PassReport> Reconcile(kube::Client& client, const PassConfig& config, Role role,
                             const Clock& clock);

}  // namespace certctl::loop
