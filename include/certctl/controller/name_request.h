// Names a replica asks the leader to issue. In a rolling update that changes --service or
// --dns-name, the new replicas are followers of an older leader that issues for its own
// flags: they write the names its certificate lacks into the Secret's annotations, and the
// leader issues its own names and the requested ones together. The new replicas become ready
// only once the certificate names them, so a rollout that completes means every replica
// serves its own names, and the old names stay until the new replicas lead.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "certctl/controller/rotation.h"
#include "certctl/kube/client.h"
#include "certctl/pki/certificate.h"
#include "certctl/pki/names.h"
#include "certctl/util/clock.h"
#include "certctl/util/result.h"

namespace certctl::controller {

// DNS names and IP addresses, comma-separated.
inline constexpr char kRequestedNamesAnnotation[] = "certctl.io/requested-names";
// When the names were first requested, RFC 3339.
inline constexpr char kNamesRequestedAtAnnotation[] = "certctl.io/names-requested-at";

// A request older than this is no longer honoured: a replica that asked and went away does
// not keep its names in every later certificate. A replica still waiting asks again.
inline constexpr std::chrono::hours kNameRequestLifetime{1};
// How long a replica waits, not ready, for the leader to issue what it asked for. A leader
// that does not read requests (an older certctl) never does: the replica then serves the
// leader's certificate as it is, waiting for its names until it leads (a rolling update must
// not stall on it).
inline constexpr std::chrono::seconds kNameRequestGrace{30};

struct NameRequest {
  std::vector<std::string> names;  // valid DNS names and IP addresses, as requested
  TimePoint at{};
};

struct NameRequestReading {
  std::optional<NameRequest> request;     // none when absent, expired or unreadable
  std::vector<RotationProblem> problems;  // what was ignored, and why
};

// The request on `secret` (named `object` in messages) as of `now`. Names that are neither a
// DNS name nor an IP address are left out and told in `problems`, as is a time that is not
// RFC 3339 or lies in the future; a value that is not a string is kBadResponse.
Result<NameRequestReading> ReadNameRequest(const nlohmann::json& secret, const std::string& object,
                                           TimePoint now);

// `identity` with the requested names it does not already require added after its own.
pki::ServiceIdentity WithRequestedNames(pki::ServiceIdentity identity, const NameRequest& request);

// `identity` with each of `called_hosts` that `stored_leaf` covers and `identity` does not
// added after its own, and for a Service's name `S.N.svc` the other forms --service gives
// (`S`, `S.N`, `S.N.svc.<domain>`) that the stored leaf has: a name in use stays in the next
// leaf, and a replica still running with the old --service finds every name it requires.
pki::ServiceIdentity WithNamesStillCalled(pki::ServiceIdentity identity,
                                          const pki::CertificateInfo& stored_leaf,
                                          const std::vector<std::string>& called_hosts);

// The names `identity` requires (DNS names in contract order, then IP addresses) that `leaf`
// does not cover, as the API server's host check would judge them.
std::vector<std::string> NamesNotCovered(const pki::ServiceIdentity& identity,
                                         const pki::CertificateInfo& leaf);

// Adds `names` to the request on the Secret (those of a current request kept, the time kept
// when it already asks for all of them, else set to `now`): a whole-object update carrying
// the resourceVersion read, re-read on conflict. Returns the request as stored.
Result<NameRequest> RequestNames(kube::Client& client, std::string_view ns, std::string_view name,
                                 const std::vector<std::string>& names, TimePoint now);

}  // namespace certctl::controller
