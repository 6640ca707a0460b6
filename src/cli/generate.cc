#include "cli/generate.h"

#include <algorithm>
#include <chrono>
#include <iostream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "certctl/pki/issue.h"
#include "certctl/pki/validate.h"
#include "certctl/util/base64.h"
#include "certctl/util/duration.h"

#include "cli/exit_codes.h"
#include "cli/pair_files.h"

namespace certctl::cli {
namespace {

constexpr char kManagedByLabel[] = "app.kubernetes.io/managed-by";
constexpr char kManagedByValue[] = "certctl";

nlohmann::ordered_json SecretManifest(const GenerateOptions& options, const std::string& ns,
                                      const PairFiles& files) {
  return {
      {"apiVersion", "v1"},
      {"kind", "Secret"},
      {"metadata",
       {{"name", options.secret_name},
        {"namespace", ns},
        {"labels", {{kManagedByLabel, kManagedByValue}}}}},
      {"type", "kubernetes.io/tls"},
      {"data",
       {{"ca.crt", Base64Encode(files.ca_crt)},
        {"ca.key", Base64Encode(files.ca_key)},
        {"tls.crt", Base64Encode(files.tls_crt)},
        {"tls.key", Base64Encode(files.tls_key)}}},
  };
}

// Every value in the manifest is a plain token (names were validated, data is base64), so
// YAML needs no quoting beyond the label key.
std::string SecretManifestYaml(const nlohmann::ordered_json& manifest) {
  std::string out;
  out += "apiVersion: v1\nkind: Secret\nmetadata:\n";
  out += "  name: " + manifest["metadata"]["name"].get<std::string>() + "\n";
  out += "  namespace: " + manifest["metadata"]["namespace"].get<std::string>() + "\n";
  out += "  labels:\n";
  out += std::string("    ") + kManagedByLabel + ": " + kManagedByValue + "\n";
  out += "type: kubernetes.io/tls\ndata:\n";
  for (const auto& [key, value] : manifest["data"].items()) {
    out += "  " + key + ": " + value.get<std::string>() + "\n";
  }
  return out;
}

// A pair that check reports expiring-soon, and job or run would replace, the moment it is
// made: legitimate for a test, a surprise otherwise.
void WarnIfDueForRenewal(const IssuanceFlags& issuance) {
  const std::chrono::seconds renew_before = pki::kDefaultRenewBefore;
  const std::chrono::seconds shortest = std::min(issuance.cert_validity, issuance.ca_validity);
  if (shortest > renew_before) {
    return;
  }
  spdlog::warn(
      "the {} is valid for {} only, within the {} before expiry at which check reports "
      "it expiring-soon and job and run renew it (their --renew-before default)",
      issuance.cert_validity <= issuance.ca_validity ? "server certificate" : "CA",
      FormatDuration(shortest), FormatDuration(renew_before));
}

}  // namespace

CLI::App* AddGenerateCommand(CLI::App& app, GenerateOptions& options) {
  CLI::App* command = app.add_subcommand(
      "generate", "Create a CA and server certificate offline (files or a Secret manifest)");
  AddIdentityFlags(*command, options.identity, IdentityRole::kIssueOffline);
  AddIssuanceFlags(*command, options.issuance);
  command->add_option("--out-dir", options.out_dir,
                      "Write ca.crt, ca.key, tls.crt and tls.key into this folder");
  command
      ->add_option("-o,--output", options.output,
                   "Print a kubernetes.io/tls Secret manifest: secret (YAML) or secret-json")
      ->check(CLI::IsMember({"secret", "secret-json"}));
  command->add_option("--secret", options.secret_name, "Name of the Secret in the manifest")
      ->check(ObjectNameCheck("Secret"))
      ->capture_default_str();
  command->add_flag("--force", options.force, "Replace existing files in --out-dir");
  return command;
}

int RunGenerate(const GenerateOptions& options, const std::string& command, const Clock& clock) {
  if (options.out_dir.empty() && options.output.empty()) {
    std::cerr << command << ": nothing to do: give --out-dir DIR and/or -o secret\n";
    return kExitUsage;
  }
  const pki::ServiceIdentity identity = ResolveIdentity(options.identity);
  if (auto valid = pki::ValidateIdentity(identity); !valid) {
    std::cerr << command << ": " << valid.error().message() << "\n";
    return kExitUsage;
  }

  const TimePoint now = clock.Now();
  auto ca = pki::IssueCa(MakeCaRequest(options.issuance, identity), now);
  if (!ca) {
    std::cerr << command << ": " << ca.error().Wrap("create CA").message() << "\n";
    return kExitFailed;
  }
  const pki::LeafRequest leaf_request = MakeLeafRequest(options.issuance, identity);
  auto leaf = pki::IssueLeaf(leaf_request, *ca, now);
  if (!leaf) {
    std::cerr << command << ": " << leaf.error().Wrap("create server certificate").message()
              << "\n";
    return kExitFailed;
  }
  auto ca_key = ca->key.ToPem();
  auto leaf_key = leaf->key.ToPem();
  if (!ca_key || !leaf_key) {
    const Error& error = !ca_key ? ca_key.error() : leaf_key.error();
    std::cerr << command << ": " << error.Wrap("encode private key").message() << "\n";
    return kExitFailed;
  }
  const PairFiles files{ca->certificate.ToPem(), *ca_key, leaf->certificate.ToPem(), *leaf_key};

  // Logged once written: a refused --out-dir has generated nothing a user can use.
  if (!options.out_dir.empty()) {
    auto written = WritePairToDir(options.out_dir, files,
                                  options.force ? Overwrite::kAllow : Overwrite::kRefuse);
    if (!written) {
      std::cerr << command << ": " << written.error().message() << "\n";
      return kExitFailed;
    }
  }
  if (!options.output.empty()) {
    const auto manifest = SecretManifest(options, identity.namespace_name, files);
    std::cout << (options.output == "secret-json" ? manifest.dump(2) + "\n"
                                                  : SecretManifestYaml(manifest));
    std::cout.flush();
  }

  const pki::CertificateInfo ca_info = ca->certificate.Info();
  const pki::CertificateInfo leaf_info = leaf->certificate.Info();
  std::string where;
  if (!options.out_dir.empty()) {
    where = "ca.crt, ca.key, tls.crt, tls.key in " + options.out_dir;
  }
  if (!options.output.empty()) {
    where += (where.empty() ? "" : ", and ") + std::string("a Secret manifest on stdout");
  }
  spdlog::info(
      "generated CA \"{}\" ({}, valid until {}) and server certificate for {} ({} names, valid "
      "until {}): {}",
      ca_info.common_name, pki::KeyTypeName(options.issuance.key_type),
      FormatRfc3339(ca_info.not_after), leaf_info.common_name,
      leaf_info.dns_names.size() + leaf_info.ip_addresses.size(),
      FormatRfc3339(leaf_info.not_after), where);
  WarnIfDueForRenewal(options.issuance);
  return kExitOk;
}

}  // namespace certctl::cli
