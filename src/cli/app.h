#pragma once

namespace certctl::cli {

// The whole command line: parses argv, sets up logging, runs one subcommand and returns
// the process exit code.
int Main(int argc, char** argv);

}  // namespace certctl::cli
