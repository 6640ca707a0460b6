#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "certctl/controller/check.h"

namespace certctl::cli {

// The stable JSON document of `certctl check -o json`.
nlohmann::ordered_json CheckReportToJson(const controller::CheckReport& report);

// What `certctl check -o json` prints when the check could not run (exit 2):
// {"ok": false, "error": message}.
nlohmann::ordered_json CheckErrorToJson(const std::string& message);

// One line per finding ("<object>: <message> [<code>]"), or one summary line when healthy.
std::string CheckReportToText(const controller::CheckReport& report);

}  // namespace certctl::cli
