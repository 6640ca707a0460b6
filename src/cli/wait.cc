#include "cli/wait.h"

#include <cerrno>
#include <cstring>
#include <iostream>
#include <thread>

#include <spdlog/spdlog.h>

#include "certctl/pki/validate.h"
#include "certctl/util/duration.h"

#include "cli/exit_codes.h"
#include "cli/pair_files.h"
#include <unistd.h>

namespace certctl::cli {
namespace {

// Empty when the folder holds a usable pair, else why not. Expiring soon is still usable;
// without ca.crt only the pair itself is judged (a Secret volume may lack it).
std::string NotReadyReason(const WaitOptions& options, const pki::ValidationPolicy& policy,
                           TimePoint now) {
  auto source = ReadPairFromDir(options.cert_dir);
  if (!source) {
    return source.error().message();
  }
  const bool has_ca = source->ca_pem.has_value();
  const pki::ValidationReport report = pki::Validate(*source, policy, now);
  for (const pki::PartFinding& entry : report.findings) {
    const FindingCode code = entry.finding.code;
    if (code == FindingCode::kExpiringSoon) {
      continue;
    }
    if (!has_ca && (entry.part == pki::Part::kCa || code == FindingCode::kUntrustedChain)) {
      continue;
    }
    return entry.finding.object + ": " + entry.finding.message;
  }
  return "";
}

}  // namespace

CLI::App* AddWaitCommand(CLI::App& app, WaitOptions& options) {
  CLI::App* command = app.add_subcommand(
      "wait",
      "Block until a folder holds a valid certificate pair, then optionally exec a command");
  command->add_option("--cert-dir", options.cert_dir, "Folder holding tls.crt, tls.key, ca.crt")
      ->required();
  AddIdentityFlags(*command, options.identity, IdentityRole::kWaitOffline);
  AddDurationFlag(*command, "--timeout", options.timeout, "Give up after this long");
  AddDurationFlag(*command, "--interval", options.interval, "How often to look");
  command->add_option("command", options.command, "Command to exec once ready (after --)")
      ->type_name("-- CMD ARGS...");
  return command;
}

int RunWait(const WaitOptions& options, const std::string& command, const Clock& clock) {
  pki::ValidationPolicy policy;
  policy.renew_before = std::chrono::seconds(0);
  if (HasIdentity(options.identity)) {
    const pki::ServiceIdentity identity = ResolveIdentity(options.identity);
    if (auto valid = pki::ValidateIdentity(identity); !valid) {
      std::cerr << command << ": " << valid.error().message() << "\n";
      return kExitUsage;
    }
    policy.dns_names = pki::RequiredDnsNames(identity);
    policy.ip_addresses = identity.ip_addresses;
  }

  const auto deadline = SaturatingAdd(std::chrono::steady_clock::now(), options.timeout);
  std::string reason;
  std::string last_logged;
  while (true) {
    reason = NotReadyReason(options, policy, clock.Now());
    if (reason.empty()) {
      break;
    }
    if (reason != last_logged) {
      spdlog::info("waiting for {}: {}", options.cert_dir, reason);
      last_logged = reason;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      std::cerr << command << ": timed out after " << FormatDuration(options.timeout)
                << " waiting for a valid pair in " << options.cert_dir << ": " << reason << "\n";
      return kExitFailed;
    }
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(options.interval, deadline - now));
  }
  spdlog::info("{} holds a valid certificate pair", options.cert_dir);
  if (options.command.empty()) {
    return kExitOk;
  }
  std::vector<char*> argv;
  for (const std::string& arg : options.command) {
    argv.push_back(const_cast<char*>(arg.c_str()));
  }
  argv.push_back(nullptr);
  spdlog::default_logger()->flush();
  ::execvp(argv[0], argv.data());
  std::cerr << command << ": cannot run " << options.command.front() << ": " << std::strerror(errno)
            << "\n";
  return kExitFailed;
}

}  // namespace certctl::cli
