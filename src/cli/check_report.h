#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "certctl/pki/validate.h"
#include "certctl/util/finding.h"

namespace certctl::cli {

// One caBundle holder: a webhook entry, a CRD conversion webhook or an APIService.
struct TargetStatus {
  std::string kind;  // "ValidatingWebhookConfiguration", ...
  std::string name;
  std::string webhook;  // entry name inside a webhook configuration, else empty
  bool ok = false;
};

struct CheckReport {
  std::string source;  // "dir /etc/certs", "files a b c", "secret ns/name"
  pki::ValidationReport validation;
  std::vector<TargetStatus> targets;
  std::vector<Finding> other_findings;  // about the source object or the targets

  std::vector<Finding> AllFindings() const;
  bool ok() const { return AllFindings().empty(); }
};

// The stable JSON document of `certctl check -o json`.
nlohmann::ordered_json CheckReportToJson(const CheckReport& report);

// One line per finding ("<object>: <message> [<code>]"), or one summary line when healthy.
std::string CheckReportToText(const CheckReport& report);

}  // namespace certctl::cli
