#include "support/certctl_cli.h"

namespace certctl::testing {

ProcessResult RunCertctl(const std::vector<std::string>& args, const ProcessOptions& options) {
  std::vector<std::string> argv = {CERTCTL_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, options);
}

int CountLines(const std::string& text) {
  int lines = 0;
  for (char c : text) {
    lines += c == '\n' ? 1 : 0;
  }
  return lines + (!text.empty() && text.back() != '\n' ? 1 : 0);
}

}  // namespace certctl::testing
