#include <exception>
#include <iostream>

#include "cli/app.h"
#include "cli/exit_codes.h"

int main(int argc, char** argv) {
  try {
    return certctl::cli::Main(argc, argv);
  } catch (const std::exception& error) {
    // Last resort: our code returns errors, but a library may still throw.
    std::cerr << "certctl: internal error: " << error.what() << "\n";
    return certctl::cli::kExitFailed;
  }
}
