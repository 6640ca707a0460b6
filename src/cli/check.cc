#include "cli/check.h"

#include <iostream>
#include <optional>

#include <spdlog/spdlog.h>

#include "cli/check_report.h"
#include "cli/exit_codes.h"
#include "cli/pair_files.h"

namespace certctl::cli {
namespace {

int CouldNotRun(const std::string& message) {
  std::cerr << "certctl check: " << message << "\n";
  return kExitUsage;
}

}  // namespace

CLI::App* AddCheckCommand(CLI::App& app, CheckOptions& options) {
  CLI::App* command = app.add_subcommand(
      "check",
      "Validate a certificate pair (files or the Secret) and the CA bundle of every target; "
      "exit 1 when anything is wrong");
  AddIdentityFlags(*command, options.identity);
  AddDurationFlag(*command, "--renew-before", options.renew_before,
                  "Report certificates with less validity left than this", /*allow_zero=*/true);
  CLI::Option* dir = command->add_option("--cert-dir", options.cert_dir,
                                         "Check the files tls.crt, tls.key, ca.crt in this folder");
  CLI::Option* cert = command->add_option("--cert", options.cert_file, "Server certificate file");
  CLI::Option* key = command->add_option("--key", options.key_file, "Server private key file");
  CLI::Option* ca = command->add_option("--ca", options.ca_file, "CA bundle file");
  CLI::Option* secret =
      command->add_option("--secret", options.secret_name,
                          "Check this Secret (the default source when no files are given)");
  secret->capture_default_str();
  cert->needs(key)->needs(ca);
  key->needs(cert);
  ca->needs(cert);
  dir->excludes(cert)->excludes(key)->excludes(ca)->excludes(secret);
  cert->excludes(secret);
  AddConnectionFlags(*command, options.connection);
  AddTargetFlags(*command, options.targets);
  command->add_option("-o,--output", options.output, "Report format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  return command;
}

int RunCheck(const CheckOptions& options, const Environment& env, const Clock& clock) {
  const bool from_files = !options.cert_dir.empty() || !options.cert_file.empty();
  std::optional<Cluster> cluster;
  if (!from_files || !options.targets.empty()) {
    // A terminal or CI command: its answer is the one line at the end, so the waits of
    // its retries are logged at debug only.
    kube::ClientOptions client_options;
    client_options.retry.on_retry = [](const std::string& message) {
      spdlog::debug("{}", message);
    };
    auto connected = ConnectToCluster(options.connection, options.identity.namespace_name, env,
                                      clock, std::move(client_options));
    if (!connected) {
      return CouldNotRun(connected.error().message());
    }
    cluster = std::move(*connected);
  }

  IdentityFlags identity_flags = options.identity;
  if (cluster) {
    identity_flags.namespace_name = cluster->ns;
  }
  const pki::ServiceIdentity identity = ResolveIdentity(identity_flags);
  pki::ValidationPolicy policy;
  if (HasIdentity(options.identity)) {
    if (auto valid = pki::ValidateIdentity(identity); !valid) {
      return CouldNotRun(valid.error().message());
    }
    policy.dns_names = pki::RequiredDnsNames(identity);
    policy.ip_addresses = identity.ip_addresses;
  }
  policy.renew_before = options.renew_before;

  controller::CheckReport report;
  if (from_files) {
    Result<pki::PairSource> source = Fail(ErrorCode::kInternal, "no source");
    if (!options.cert_dir.empty()) {
      report.source = "dir " + options.cert_dir;
      source = ReadPairFromDir(options.cert_dir);
    } else {
      report.source = "files " + options.cert_file + " " + options.key_file + " " + options.ca_file;
      source = ReadPairFromFiles(options.cert_file, options.key_file, options.ca_file);
    }
    if (!source) {
      return CouldNotRun(source.error().message());
    }
    report.validation = pki::Validate(*source, policy, clock.Now());
  } else {
    auto checked = controller::CheckSecret(*cluster->client, cluster->ns, options.secret_name,
                                           policy, clock.Now());
    if (!checked) {
      return CouldNotRun(checked.error().message());
    }
    report = std::move(*checked);
  }
  if (cluster && !options.targets.empty()) {
    if (auto checked = controller::CheckTargets(*cluster->client, options.targets, report);
        !checked) {
      return CouldNotRun(checked.error().message());
    }
  }

  if (options.output == "json") {
    std::cout << CheckReportToJson(report).dump(2) << "\n";
  } else {
    std::cout << CheckReportToText(report);
  }
  std::cout.flush();
  return report.ok() ? kExitOk : kExitFailed;
}

}  // namespace certctl::cli
