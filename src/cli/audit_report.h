#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "certctl/audit/audit.h"

namespace certctl::cli {

// The JSON document of `certctl audit -o json` (SPEC 9a): "ok" judged at `fail_on`.
nlohmann::ordered_json AuditReportToJson(const audit::AuditReport& report, audit::Severity fail_on);

// One line per finding ("<severity> <object> <entry>: <message> [<code>]"), the notes, and a
// last line counting what was audited.
std::string AuditReportToText(const audit::AuditReport& report);

// One kubeconfig context of `audit --context A --context B` or `--all-contexts`: its report, or
// why it could not be audited.
struct ContextAudit {
  std::string context;
  std::optional<audit::AuditReport> report;
  std::string error;
};

// A list: per context {"context", then the report's document}, or {"context", "ok": false,
// "error"} for one that could not be audited.
nlohmann::ordered_json FleetToJson(const std::vector<ContextAudit>& audits,
                                   audit::Severity fail_on);

// Per context a "context NAME:" line, then its report's lines (or why it could not be audited)
// indented.
std::string FleetToText(const std::vector<ContextAudit>& audits);

}  // namespace certctl::cli
