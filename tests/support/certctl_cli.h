#pragma once

#include <string>
#include <vector>

#include "support/process.h"

namespace certctl::testing {

// Runs the built certctl binary with `args`.
ProcessResult RunCertctl(const std::vector<std::string>& args, const ProcessOptions& options = {});

// Number of lines in `text` (a final line without newline counts).
int CountLines(const std::string& text);

}  // namespace certctl::testing
