#pragma once

#include <optional>
#include <string>
#include <vector>

#include "certctl/controller/check.h"
#include "certctl/controller/targets.h"
#include "certctl/inject/called_names.h"
#include "certctl/kube/client.h"
#include "certctl/pki/certificate.h"
#include "certctl/util/finding.h"
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

// Reads what the API server would dial for every target status of `report` that calls a
// Service (GET of the Service, LIST of its EndpointSlices): a Service that does not exist,
// lacks the port called or has no ready endpoint is a call finding, and the statuses calling
// it are no longer ok. A read the credentials are refused is a note, not an error; other API
// failures are errors.
Status CheckServices(kube::Client& client, CheckReport& report);

}  // namespace certctl::controller
