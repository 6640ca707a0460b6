#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "certctl/controller/check.h"
#include "certctl/controller/targets.h"
#include "certctl/inject/called_names.h"
#include "certctl/kube/client.h"
#include "certctl/pki/certificate.h"
#include "certctl/util/clock.h"
#include "certctl/util/finding.h"
#include "certctl/util/host_port.h"
#include "certctl/util/result.h"

namespace certctl::controller {

// The API server's view of the targets (SPEC 4a): a caBundle alone does not make a webhook
// callable; the server certificate must also name what each entry calls.

// One caBundle slot's endpoint, judged against the leaf.
struct CallVerdict {
  inject::CalledEndpoint endpoint;
  // target-invalid when the entry names nothing callable; target-name-not-covered when the
  // leaf does not name what it calls.
  std::optional<Finding> finding;
};

// A verdict per caBundle slot of `target`, in ReadBundleSlots order. Without a leaf (the
// source's findings say why) only malformed entries are found.
std::vector<CallVerdict> JudgeCalls(const TargetObject& target, const pki::CertificateInfo* leaf);

// The findings of JudgeCalls over every target, in order.
std::vector<Finding> CallFindings(const std::vector<TargetObject>& targets,
                                  const pki::CertificateInfo& leaf);

// How findings name an entry: "webhooks[1] (check.example.com)", "spec.conversion.webhook",
// "spec.service".
std::string EntryLabel(const inject::CalledEndpoint& endpoint);

// What the API server meets dialling port `port` of a Service, judged from what was read:
// `service` as stored (nullptr: it does not exist) and the items of its EndpointSlices
// (nullptr: not read, so readiness is not judged). The one place that decides whether a
// Service call can connect, for `check`, the failure-policy gate and `audit`.
struct ServiceReach {
  // kServiceMissing, kServicePortMissing or kNoReadyEndpoints; none when the call connects
  // (or, slices unread, may).
  std::optional<FindingCode> problem;
  std::string detail;         // "does not exist", "has no port 8443 (it has 443)", ...
  bool needs_slices = false;  // the port is there and readiness was not judged
  int malformed = 0;          // endpoints whose conditions.ready is neither true nor false
  // Where the API server may connect: the first address of each ready endpoint and the port
  // its slice serves the Service port on, at most kReadyAddressesKept of them.
  std::vector<HostPort> ready_addresses;
};
inline constexpr std::size_t kReadyAddressesKept = 8;
Result<ServiceReach> JudgeServiceReach(const kube::Json* service, const kube::Json* slices,
                                       std::int64_t port, const std::string& object);

// Reads what the API server would dial for every target status of `report` that calls a
// Service (GET of the Service, LIST of its EndpointSlices): a Service that does not exist,
// lacks the port called or has no ready endpoint is a call finding, and the statuses calling
// it are no longer ok. A read the credentials are refused is a note, not an error; other API
// failures are errors.
Status CheckServices(kube::Client& client, CheckReport& report);

// --failure-policy-once-ready (SPEC 4a): Fail goes only to an entry the API server can call.
struct ClosableEntries {
  // ("validatingwebhookconfiguration/x", webhooks[].name) of the entries with Ignore that can
  // be called: they may fail closed.
  std::set<std::pair<std::string, std::string>> entries;
  // Why the other entries with Ignore keep it (a name not covered, a Service or its port
  // missing, no ready endpoint); what could not be read.
  std::vector<Finding> findings;
  std::vector<std::string> notes;
  std::size_t kept = 0;  // entries with Ignore that may not fail closed

  bool Closable(const std::string& object, const std::string& entry) const {
    return entries.contains({object, entry});
  }
};

// Judges every entry with failurePolicy Ignore of the webhook configurations among `targets`
// as the API server would call it: its called name covered by `leaf` (when given), the
// Service it calls existing with the port it names and, where certctl may read
// EndpointSlices, with a ready endpoint. A Service the credentials may not read is not known
// to exist: its entries are not closable, and a note says so. Reads nothing when no entry
// has Ignore (a steady cluster).
Result<ClosableEntries> JudgeClosable(kube::Client& client,
                                      const std::vector<TargetObject>& targets,
                                      const pki::CertificateInfo* leaf);

// JudgeClosable, judged again every second until `deadline` while the only reason an entry
// keeps Ignore is a Service without a ready endpoint yet (a hook runs while the webhook's pods
// start); anything else is the verdict at once.
Result<ClosableEntries> JudgeClosableUntil(kube::Client& client,
                                           const std::vector<TargetObject>& targets,
                                           const pki::CertificateInfo* leaf, TimePoint deadline,
                                           const Clock& clock);

}  // namespace certctl::controller
