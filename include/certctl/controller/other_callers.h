// Webhooks outside the targets that a new server certificate would break: entries of any
// Validating- or MutatingWebhookConfiguration in the cluster that call, by
// clientConfig.service, a Service whose name `S.N.svc` the new certificate drops, and whose
// caBundle holds a CA of the Secret's (so the Secret's certificate is what serves them). The
// targets' own names are kept in a new certificate (WithNamesStillCalled); these are the
// callers certctl is not told about, such as another webhook sharing the Secret.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "certctl/controller/check.h"
#include "certctl/kube/client.h"
#include "certctl/util/result.h"

namespace certctl::controller {

// One webhook entry that calls a dropped name trusting the Secret's CA.
struct OtherCaller {
  std::string object;   // "validatingwebhookconfiguration/demo-webhook"
  std::string field;    // "webhooks[0]"
  std::string webhook;  // webhooks[].name: "v.demo.io"
  std::string host;     // the dropped name it calls: "demo-webhook.demo.svc"

  // "validatingwebhookconfiguration/demo-webhook webhooks[0] (v.demo.io) calls
  // demo-webhook.demo.svc"
  std::string Describe() const;
};

struct OtherCallersLook {
  std::vector<OtherCaller> found;
  // Why the configurations could not be read (kPermissionDenied: certctl may not list them,
  // the chart's least privilege); `found` is then empty and nothing is known.
  std::optional<Error> not_looked;
};

// One LIST of each webhook configuration kind; the entries of `targets` never count (their
// names are kept). With a label selector among `targets`, the configurations it selects are
// listed too, to leave them out. Best effort: a failed LIST is told in `not_looked`, never an
// error, since what it would find only warns or asks for confirmation.
OtherCallersLook FindOtherCallers(kube::Client& client, const TargetSelection& targets,
                                  const std::vector<std::string>& dropped,
                                  const std::string& ca_bundle);

// The callers as one clause each, joined by "; ".
std::string DescribeOtherCallers(const std::vector<OtherCaller>& callers);

// The warning for an entry that the server certificate of `secret_object`, re-issued without
// the name it calls, now breaks.
std::string BrokenCallerWarning(const OtherCaller& caller, const std::string& secret_object);

// What to say when the look could not be made. `refused` (403): certctl may not list webhook
// configurations, the chart's least privilege rather than a fault, worth a debug line only.
struct NotLookedNotice {
  std::string line;
  bool refused;
};
NotLookedNotice NoticeOfNotLooked(const Error& not_looked, const std::string& secret_object);

}  // namespace certctl::controller
