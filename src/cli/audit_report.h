#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "certctl/audit/audit.h"

namespace certctl::cli {

// The JSON document of `certctl audit -o json` (SPEC 9a): "ok" judged at `fail_on`.
nlohmann::ordered_json AuditReportToJson(const audit::AuditReport& report, audit::Severity fail_on);

// One line per finding ("<severity> <object> <entry>: <message> [<code>]"), the notes, and a
// last line counting what was audited.
std::string AuditReportToText(const audit::AuditReport& report);

}  // namespace certctl::cli
