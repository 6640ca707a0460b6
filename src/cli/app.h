#pragma once

#include <string>

namespace certctl::cli {

// The whole command line: parses argv, sets up logging, runs one subcommand and returns
// the process exit code. `program` (ProgramName) is the name help, usage lines and messages
// give: "certctl", or "kubectl certctl" when run as the kubectl plugin.
int Main(const std::string& program, int argc, char** argv);

}  // namespace certctl::cli
