#include "cli/check.h"

#include <iostream>

#include "cli/check_report.h"
#include "cli/exit_codes.h"
#include "cli/pair_files.h"

namespace certctl::cli {

CLI::App* AddCheckCommand(CLI::App& app, CheckOptions& options) {
  CLI::App* command = app.add_subcommand(
      "check", "Validate a certificate pair and report every problem (exit 1 when any)");
  AddIdentityFlags(*command, options.identity);
  AddDurationFlag(*command, "--renew-before", options.renew_before,
                  "Report certificates with less validity left than this", /*allow_zero=*/true);
  CLI::Option* dir = command->add_option("--cert-dir", options.cert_dir,
                                         "Folder holding tls.crt, tls.key, ca.crt");
  CLI::Option* cert = command->add_option("--cert", options.cert_file, "Server certificate file");
  CLI::Option* key = command->add_option("--key", options.key_file, "Server private key file");
  CLI::Option* ca = command->add_option("--ca", options.ca_file, "CA bundle file");
  cert->needs(key)->needs(ca);
  key->needs(cert);
  ca->needs(cert);
  dir->excludes(cert)->excludes(key)->excludes(ca);
  command->add_option("-o,--output", options.output, "Report format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  return command;
}

int RunCheck(const CheckOptions& options, const Clock& clock) {
  if (options.cert_dir.empty() && options.cert_file.empty()) {
    std::cerr << "certctl check: nothing to check: give --cert-dir DIR or --cert/--key/--ca\n";
    return kExitUsage;
  }
  const pki::ServiceIdentity identity = ResolveIdentity(options.identity);
  if (HasIdentity(options.identity)) {
    if (auto valid = pki::ValidateIdentity(identity); !valid) {
      std::cerr << "certctl check: " << valid.error().message() << "\n";
      return kExitUsage;
    }
  }

  CheckReport report;
  Result<pki::PairSource> source = Fail(ErrorCode::kInternal, "no source");
  if (!options.cert_dir.empty()) {
    report.source = "dir " + options.cert_dir;
    source = ReadPairFromDir(options.cert_dir);
  } else {
    report.source = "files " + options.cert_file + " " + options.key_file + " " + options.ca_file;
    source = ReadPairFromFiles(options.cert_file, options.key_file, options.ca_file);
  }
  if (!source) {
    std::cerr << "certctl check: " << source.error().message() << "\n";
    return kExitUsage;
  }

  pki::ValidationPolicy policy;
  if (HasIdentity(options.identity)) {
    policy.dns_names = pki::RequiredDnsNames(identity);
    policy.ip_addresses = identity.ip_addresses;
  }
  policy.renew_before = options.renew_before;
  report.validation = pki::Validate(*source, policy, clock.Now());

  if (options.output == "json") {
    std::cout << CheckReportToJson(report).dump(2) << "\n";
  } else {
    std::cout << CheckReportToText(report);
  }
  std::cout.flush();
  return report.ok() ? kExitOk : kExitFailed;
}

}  // namespace certctl::cli
