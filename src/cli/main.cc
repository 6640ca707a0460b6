#include <exception>
#include <iostream>
#include <string>

#include "cli/app.h"
#include "cli/exit_codes.h"
#include "cli/program_name.h"

int main(int argc, char** argv) {
  std::string program = "certctl";
  try {
    program = certctl::cli::ProgramName(argc > 0 ? argv[0] : "");
    return certctl::cli::Main(program, argc, argv);
  } catch (const std::exception& error) {
    // Last resort: our code returns errors, but a library may still throw.
    std::cerr << program << ": internal error: " << error.what() << "\n";
    return certctl::cli::kExitFailed;
  }
}
