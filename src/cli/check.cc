#include "cli/check.h"

#include <iostream>
#include <optional>

#include <spdlog/spdlog.h>

#include "certctl/controller/callable.h"

#include "cli/check_report.h"
#include "cli/exit_codes.h"
#include "cli/pair_files.h"

namespace certctl::cli {
int CouldNotRun(const std::string& command, const std::string& message, const std::string& output) {
  std::cerr << command << ": " << message << "\n";
  if (output == "json") {
    PrintCheckError(message);
  }
  return kExitUsage;
}

bool CheckWantsJson(int argc, char** argv) {
  bool in_command = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (!in_command) {
      in_command = arg == "check" || arg == "audit";
      continue;
    }
    if (arg == "--") {
      return false;
    }
    const bool separate = (arg == "-o" || arg == "--output") && i + 1 < argc &&
                          std::string_view(argv[i + 1]) == "json";
    if (separate || arg == "-ojson" || arg == "--output=json") {
      return true;
    }
  }
  return false;
}

kube::ClientOptions ReportClientOptions() {
  kube::ClientOptions options;
  options.retry.on_retry = [](const std::string& message) { spdlog::debug("{}", message); };
  return options;
}

void PrintCheckError(const std::string& message) {
  std::cout << CheckErrorToJson(message).dump(2) << "\n";
  std::cout.flush();
}

CLI::App* AddCheckCommand(CLI::App& app, CheckOptions& options) {
  CLI::App* command = app.add_subcommand(
      "check",
      "Validate a certificate pair (files or the Secret) and the CA bundle of every target; "
      "exit 1 when anything is wrong");
  AddIdentityFlags(*command, options.identity, IdentityRole::kCheck);
  AddDurationFlag(*command, "--renew-before", options.renew_before,
                  "Report certificates with less validity left than this", /*allow_zero=*/true);
  AddDurationFlag(*command, "--ca-overlap", options.ca_overlap,
                  "The --ca-overlap the controller runs with: a Secret whose previous CA stays "
                  "trusted longer than this after its server certificate moved is reported",
                  /*allow_zero=*/true);
  CLI::Option* dir = command->add_option("--cert-dir", options.cert_dir,
                                         "Check the files tls.crt, tls.key, ca.crt in this folder");
  CLI::Option* cert = command->add_option("--cert", options.cert_file, "Server certificate file");
  CLI::Option* key = command->add_option("--key", options.key_file, "Server private key file");
  CLI::Option* ca = command->add_option("--ca", options.ca_file, "CA bundle file");
  CLI::Option* secret =
      command->add_option("--secret", options.secret_name,
                          "Check this Secret (the default source when no files are given)");
  secret->check(ObjectNameCheck("Secret"))->capture_default_str();
  cert->needs(key)->needs(ca);
  key->needs(cert);
  ca->needs(cert);
  dir->excludes(cert)->excludes(key)->excludes(ca)->excludes(secret);
  cert->excludes(secret);
  AddConnectionFlags(*command, options.connection);
  AddTargetFlags(*command, options.targets, TargetRole::kCheck);
  command->add_option("-o,--output", options.output, "Report format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  return command;
}

int RunCheck(const CheckOptions& options, const std::string& command, const Environment& env,
             const Clock& clock) {
  const auto could_not_run = [&](const std::string& message) {
    return CouldNotRun(command, message, options.output);
  };
  const bool from_files = !options.cert_dir.empty() || !options.cert_file.empty();
  std::optional<Cluster> cluster;
  if (!from_files || !options.targets.empty()) {
    auto connected = ConnectToCluster(options.connection, options.identity.namespace_name, env,
                                      clock, ReportClientOptions());
    if (!connected) {
      return could_not_run(connected.error().message());
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
      return could_not_run(valid.error().message());
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
      return could_not_run(source.error().message());
    }
    report.validation = pki::Validate(*source, policy, clock.Now());
  } else {
    auto checked = controller::CheckSecret(*cluster->client, cluster->ns, options.secret_name,
                                           policy, clock.Now(), options.ca_overlap);
    if (!checked) {
      return could_not_run(checked.error().message());
    }
    report = std::move(*checked);
  }
  if (cluster && !options.targets.empty()) {
    if (auto checked = controller::CheckTargets(*cluster->client, options.targets, report);
        !checked) {
      return could_not_run(checked.error().message());
    }
    // What the API server would dial, read with the user's own credentials.
    if (auto checked = controller::CheckServices(*cluster->client, report); !checked) {
      return could_not_run(checked.error().message());
    }
  }
  if (!HasIdentity(options.identity) && options.targets.empty()) {
    report.notes.push_back(
        "no SAN was checked: name what the certificate must cover with --service, --dns-name "
        "or --ip, or give the targets whose calls it must serve");
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
