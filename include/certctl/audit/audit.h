// `certctl audit` (SPEC 9a): what the API server meets when it calls every webhook in the
// cluster, whoever manages it. Read-only: the only requests are GETs and LISTs.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "certctl/kube/client.h"
#include "certctl/pki/validate.h"
#include "certctl/probe/handshake.h"
#include "certctl/util/clock.h"
#include "certctl/util/finding.h"
#include "certctl/util/result.h"

namespace certctl::audit {

enum class Severity { kWarning, kCritical };
std::string_view SeverityName(Severity severity);  // "warning", "critical"
std::optional<Severity> ParseSeverity(std::string_view name);

struct AuditFinding {
  FindingCode code;
  Severity severity;
  std::string object;  // "validatingwebhookconfiguration/x"; for timeouts-add-up the requests
  std::string entry;   // "webhooks[0] (v.example.com)", "spec.service"; empty when about many
  std::string message;
};

// One caBundle slot as the API server reads it: a webhook entry, a CRD's conversion webhook,
// an APIService.
struct AuditedEntry {
  std::string kind;  // "ValidatingWebhookConfiguration", ...
  std::string name;
  std::string entry;           // as findings name it
  std::string calls;           // the URL, or the Service's NAME.NAMESPACE.svc:PORT/PATH
  std::string failure_policy;  // "Fail", "Ignore"; empty for a CRD or an APIService
  // The object asks for its CA by annotation (`certctl controller`, or cainjector for
  // cert-manager's): which annotation, and its NAMESPACE/SECRET; empty when it does not.
  std::string injection_annotation;
  std::string injected_from;
  int bundle_certificates = 0;
  std::optional<TimePoint> bundle_not_after;  // the earliest of them
  std::vector<AuditFinding> findings;
};

struct AuditReport {
  std::vector<AuditedEntry> entries;
  std::vector<AuditFinding> findings;  // every finding: the entries', then those about many
  std::vector<std::string> notes;      // what could not be read, so silence is not a pass
  // Whether the certificates the webhooks serve were judged (--handshake): without it a
  // served certificate that does not name the called Service goes unseen.
  bool handshake = false;
  // Whether a finding is at `fail_on` or above.
  bool Fails(Severity fail_on) const;
};

// How a handshake is made: probe::DialAsApiServer, or a stand-in in tests.
using Dialer = std::function<probe::HandshakeOutcome(
    const HostPort& address, const std::string& server_name, const std::string& bundle_pem,
    std::chrono::milliseconds timeout)>;

struct AuditOptions {
  std::string selector;  // label selector for all four kinds; empty: every object
  std::chrono::seconds renew_before = pki::kDefaultRenewBefore;
  // --handshake: dial every entry as the API server would (each ready endpoint of its
  // Service, up to controller::kReadyAddressesKept, or its URL), trusting only its caBundle
  // and verifying the name it calls, and judge the certificate served.
  bool handshake = false;
  Dialer dial = probe::DialAsApiServer;
};

// Lists the four kinds, then the Services and EndpointSlices the entries call (a page at a
// time, keeping only those), and judges every entry at `now`. A refused read of Services or
// EndpointSlices is a note; any other API failure is an error.
Result<AuditReport> Audit(kube::Client& client, const AuditOptions& options, TimePoint now);

}  // namespace certctl::audit
