// Who issued the pair a Secret holds, and under which settings. Two long-running certctl
// instances with different settings on one Secret (a second Deployment, a copy with other
// flags) would otherwise re-issue it in turn for ever, each for its own names. Every pair
// certctl issues records its issuer; an instance that started earlier than the issuer of the
// pair it finds, under other settings, leaves that pair as it is, says so once in the Secret
// (an objection), and both report conflicting-configuration naming the other. The later one
// wins so that a rolling update that changes the settings completes: its pods started after
// the old ones. Names that can be merged are not settings: different --service flags still
// converge on one certificate (name_request.h, WithNamesStillCalled).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "certctl/kube/client.h"
#include "certctl/pki/validate.h"
#include "certctl/util/clock.h"
#include "certctl/util/result.h"

namespace certctl::controller {

// "certctl run hook-7d9f_x2k4": the command and the instance's identity.
inline constexpr char kIssuedByAnnotation[] = "certctl.io/issued-by";
// When that instance started, RFC 3339.
inline constexpr char kIssuerStartedAnnotation[] = "certctl.io/issuer-started";
// Its settings, "key-type=ecdsa-p256,cluster-domain=cluster.local,...".
inline constexpr char kIssuedWithAnnotation[] = "certctl.io/issued-with";
// An earlier instance that leaves the pair as it is though its settings differ, and its
// settings; removed when it stops or issues itself.
inline constexpr char kObjectedByAnnotation[] = "certctl.io/objected-by";
inline constexpr char kObjectedWithAnnotation[] = "certctl.io/objected-with";

// The settings that shape a pair and cannot be merged the way names can, in a fixed order:
// key type, cluster domain, CA subject (when set by a flag), lifetimes.
using IssuerSettings = std::vector<std::pair<std::string, std::string>>;

std::string FormatSettings(const IssuerSettings& settings);
// What FormatSettings wrote; entries without "=" are left out.
IssuerSettings ParseSettings(std::string_view text);

// This process, as the Secret records it.
struct Issuer {
  std::string command;   // "run", "job", "rotate"
  std::string identity;  // --identity, else $POD_NAME or the host name, with a random suffix
  TimePoint started{};
  IssuerSettings settings;

  std::string Name() const;  // "certctl run hook-7d9f_x2k4"
};

// An issuer or objector as a Secret records it.
struct RecordedInstance {
  std::string name;                  // "certctl run hook-7d9f_x2k4"
  std::optional<TimePoint> started;  // none when absent or not RFC 3339
  IssuerSettings settings;
};

// Who issued the pair, when the Secret says (a pair of an older certctl, or of another
// tool, says nothing).
std::optional<RecordedInstance> RecordedIssuer(const nlohmann::json& secret);
// Who objects to the pair, when one does.
std::optional<RecordedInstance> RecordedObjection(const nlohmann::json& secret);

// Records `issuer` as the pair's; an objection from an instance whose settings are the
// issuer's own is dropped, since what it asked for is now stored.
void RecordIssuer(nlohmann::json& secret, const Issuer& issuer);
// Records `issuer`'s objection to the pair as stored.
void RecordObjection(nlohmann::json& secret, const Issuer& issuer);
// Removes `issuer`'s own objection; true when there was one.
bool DropObjection(nlohmann::json& secret, const Issuer& issuer);

// True when `self` leaves alone the pair `issuer` issued: both run for a long time (`certctl
// run`), they are different instances under different settings, and `issuer` started later
// (a tie goes to the greater name). One-shot commands never yield, nor does anyone to them.
bool YieldsTo(const Issuer& self, const RecordedInstance& issuer);

// True when a stored pair would be re-issued only for the names it lacks: what a rival's
// settings change, and the one thing an instance that yields leaves undone. An expiring,
// broken or untrusted pair is renewed by whoever finds it, whatever its issuer.
bool LacksOnlyNames(const pki::ValidationReport& validation);

// The settings of `other` that differ from `own`, "key-type rsa-2048 (here: ecdsa-p256)" with
// `own_label` "here"; a setting one side lacks is "default".
std::vector<std::string> DifferingSettings(const IssuerSettings& own, const IssuerSettings& other,
                                           std::string_view own_label = "here");

// Two instances with different settings on one Secret, as one of them reports it.
struct ConfigurationConflict {
  std::string other;                   // "certctl run hook-b_x2k4 (started 2026-…)"
  std::vector<std::string> differing;  // DifferingSettings(own, other's)
  bool yielding = false;               // this instance leaves the other's pair as it is

  // One line naming `object` (the Secret), the other instance, what differs and what to do.
  std::string Describe(const std::string& object) const;
  bool operator==(const ConfigurationConflict&) const = default;
};

// `self` yields to `issuer` (YieldsTo): the conflict as `self` reports it.
ConfigurationConflict YieldingConflict(const Issuer& self, const RecordedInstance& issuer);

// The conflict `self` reports about a Secret whose pair was issued under its own settings (by
// itself or a replica like it): an objection from another instance under other settings.
// None when there is no such objection.
std::optional<ConfigurationConflict> ObjectedConflict(const Issuer& self,
                                                      const nlohmann::json& secret);

// What the Secret's annotations say of a conflict, for `check` and `audit`: an objection from
// an instance whose settings differ from those the pair was issued under, naming both and
// what differs. None when there is no such objection.
std::optional<std::string> RecordedConflict(const nlohmann::json& secret);

// On a graceful stop: an instance another one yields to hands the Secret over (its record
// removed, so that the one objecting issues for itself), and an objection of its own is
// withdrawn. Writes only when either is there: a lone instance's stop writes nothing.
Status StepAside(kube::Client& client, std::string_view ns, std::string_view name,
                 const Issuer& self);

}  // namespace certctl::controller
