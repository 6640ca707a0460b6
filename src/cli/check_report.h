#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "certctl/controller/check.h"

namespace certctl::cli {

// The stable JSON document of `certctl check -o json`.
nlohmann::ordered_json CheckReportToJson(const controller::CheckReport& report);

// One line per finding ("<object>: <message> [<code>]"), or one summary line when healthy.
std::string CheckReportToText(const controller::CheckReport& report);

}  // namespace certctl::cli
