#include "cli/program_name.h"

namespace certctl::cli {

std::string ProgramName(std::string_view argv0) {
  // kubectl runs a plugin with argv[0] set to the path it found on PATH.
  const std::size_t slash = argv0.rfind('/');
  const std::string_view base = slash == std::string_view::npos ? argv0 : argv0.substr(slash + 1);
  return base == kPluginExecutable ? "kubectl certctl" : "certctl";
}

}  // namespace certctl::cli
