#include "cli/flags.h"

#include <cstdlib>
#include <utility>

#include <spdlog/spdlog.h>

#include "certctl/kube/names.h"
#include "certctl/kube/selector.h"
#include "certctl/util/duration.h"
#include "certctl/util/text.h"

namespace certctl::cli {
namespace {

// Warnings about flag values that parse but likely mean something else, kept until logging is
// set up (flags are parsed before it).
std::vector<std::string>& PendingWarnings() {
  static std::vector<std::string> warnings;
  return warnings;
}

CLI::Validator NameCheck(const std::string& kind, Status (*validate)(std::string_view),
                         const char* rule) {
  return {[kind, validate, rule](const std::string& value) {
            constexpr std::size_t kShownBytes = 80;
            auto valid = validate(value);
            return valid ? std::string()
                         : "\"" + OneLine(value, kShownBytes) + "\" is not a valid " + kind +
                               " name: " + valid.error().message() + "; a " + kind +
                               " name must be " + rule;
          },
          ""};  // no description: the help shows the flag's own type name
}

}  // namespace

CLI::Validator ObjectNameCheck(const std::string& kind) {
  return NameCheck(kind, kube::ValidateSubdomainName, kube::kSubdomainRule);
}

CLI::Validator NamespaceNameCheck() {
  return NameCheck("namespace", kube::ValidateLabelName, kube::kLabelRule);
}

CLI::Validator LabelSelectorCheck(const std::string& blank_matches) {
  return {[blank_matches](const std::string& text) {
            if (!blank_matches.empty() && kube::SelectsEverything(text)) {
              return "a blank label selector would match every " + blank_matches +
                     " in the cluster; give at least one requirement";
            }
            auto valid = kube::ValidateLabelSelector(text);
            return valid ? std::string() : valid.error().message();
          },
          ""};  // no description: the help shows the type name, SELECTOR, once
}

std::vector<std::string> TakeFlagWarnings() { return std::exchange(PendingWarnings(), {}); }

CLI::Option* AddDurationFlag(CLI::App& app, const std::string& name, std::chrono::seconds& target,
                             const std::string& description, bool allow_zero) {
  CLI::Option* option = app.add_option_function<std::string>(
      name,
      [&target, allow_zero, name](const std::string& text) {
        auto parsed = ParseDuration(text, allow_zero);
        if (!parsed) {
          throw CLI::ValidationError(name + ": " + parsed.error().message());
        }
        if (auto ambiguity = DurationAmbiguity(text)) {
          PendingWarnings().push_back(name + ": " + *ambiguity);
        }
        target = *parsed;
      },
      description);
  option->type_name("DURATION")->default_str(FormatDuration(target));
  return option;
}

void AddIdentityFlags(CLI::App& app, IdentityFlags& flags, IdentityRole role) {
  constexpr char kOfflineNamespace[] = "(default: $POD_NAMESPACE, else \"default\")";
  constexpr char kClusterNamespace[] =
      "(default: $POD_NAMESPACE, else the service account's namespace in a pod, else the "
      "kubeconfig context's, else \"default\")";
  const bool issues = role == IdentityRole::kIssueOffline || role == IdentityRole::kIssueInCluster;
  std::string service_help;
  std::string namespace_help;
  switch (role) {
    case IdentityRole::kIssueOffline:
      service_help = "Name of the webhook's Service; its DNS names become the certificate's SANs";
      namespace_help = std::string("Namespace of the Service ") + kOfflineNamespace;
      break;
    case IdentityRole::kIssueInCluster:
      service_help =
          "Name of the webhook's Service; its DNS names become the server certificate's SANs";
      namespace_help = std::string("Namespace of the Secret and the Service ") + kClusterNamespace;
      break;
    case IdentityRole::kCheck:
      service_help =
          "Name of the webhook's Service; the server certificate must cover its DNS names";
      namespace_help = std::string("Namespace of the Secret and the Service ") + kClusterNamespace +
                       "; with files: $POD_NAMESPACE, else \"default\"";
      break;
    case IdentityRole::kWaitOffline:
      service_help = "Name of the webhook's Service; the certificate must cover its DNS names";
      namespace_help =
          std::string("Namespace of the Service whose names the certificate must cover ") +
          kOfflineNamespace;
      break;
  }
  app.add_option("--service", flags.service, service_help);
  app.add_option("-n,--namespace", flags.namespace_name, namespace_help)
      ->check(NamespaceNameCheck());
  app.add_option("--cluster-domain", flags.cluster_domain,
                 "Cluster DNS domain, the suffix of the Service's DNS names")
      ->capture_default_str();
  const std::string bound =
      " (repeatable; with --ip at most " + std::to_string(pki::kMaxExtraNames) + ")";
  app.add_option("--dns-name", flags.dns_names,
                 issues ? "Extra DNS name to put in the server certificate" + bound
                        : "Extra DNS name the server certificate must cover" + bound)
      ->type_name("NAME");
  app.add_option("--ip", flags.ip_addresses,
                 issues ? "IP address to put in the server certificate (repeatable)"
                        : "IP address the server certificate must cover (repeatable)")
      ->type_name("IP");
}

pki::ServiceIdentity ResolveIdentity(const IdentityFlags& flags) {
  pki::ServiceIdentity identity;
  identity.service = flags.service;
  identity.namespace_name = flags.namespace_name;
  bool defaulted = false;
  if (identity.namespace_name.empty()) {
    const char* from_env = std::getenv("POD_NAMESPACE");
    defaulted = from_env == nullptr || *from_env == '\0';
    identity.namespace_name = defaulted ? "default" : from_env;
  }
  identity.cluster_domain = flags.cluster_domain;
  identity.extra_dns_names = flags.dns_names;
  identity.ip_addresses = flags.ip_addresses;
  // Said only of an identity the command goes on to use: a bad one is refused on one line.
  if (defaulted && !identity.service.empty() && pki::ValidateIdentity(identity)) {
    spdlog::info(
        "no -n and no $POD_NAMESPACE: the Service \"{}\" is taken to be in namespace "
        "\"default\"",
        identity.service);
  }
  return identity;
}

bool HasIdentity(const IdentityFlags& flags) {
  return !flags.service.empty() || !flags.dns_names.empty() || !flags.ip_addresses.empty();
}

void AddIssuanceFlags(CLI::App& app, IssuanceFlags& flags, bool with_ca_name) {
  std::vector<std::string> key_type_names;
  for (pki::KeyType type : pki::AllKeyTypes()) {
    key_type_names.emplace_back(pki::KeyTypeName(type));
  }
  app.add_option_function<std::string>(
         "--key-type",
         [&flags](const std::string& name) {
           auto parsed = pki::ParseKeyType(name);
           if (!parsed) {
             throw CLI::ValidationError(parsed.error().message());
           }
           flags.key_type = *parsed;
         },
         "Key algorithm for CA and server certificate")
      ->check(CLI::IsMember(key_type_names))
      ->default_str(std::string(pki::KeyTypeName(flags.key_type)));
  AddDurationFlag(app, "--ca-validity", flags.ca_validity, "Lifetime of a new CA");
  AddDurationFlag(app, "--cert-validity", flags.cert_validity,
                  "Lifetime of a new server certificate (never beyond the CA's)");
  if (with_ca_name) {
    app.add_option("--ca-name", flags.ca_name, "Common name of a new CA (default: <service>-ca)");
  }
  app.add_option("--ca-organization", flags.ca_organization, "Organization (O) of a new CA");
}

void AddServingAddressFlag(CLI::App& app, std::string& address, const std::string& description) {
  app.add_option("--serving-addr", address, description)->type_name("HOST:PORT");
}

Result<std::optional<HostPort>> ParseServingAddress(const std::string& text) {
  if (text.empty()) {
    return std::optional<HostPort>();
  }
  auto parsed = ParseHostPort(text, "serving address");
  if (!parsed) {
    return Fail(ErrorCode::kInvalidArgument, "--serving-addr: " + parsed.error().message());
  }
  if (parsed->host.empty() || parsed->port == 0) {
    return Fail(ErrorCode::kInvalidArgument,
                "--serving-addr: \"" + text +
                    "\" needs a host and a port to connect to, like 127.0.0.1:9443");
  }
  return std::optional<HostPort>(*parsed);
}

void AddFailurePolicyOnceReadyFlag(CLI::App& app, std::string& policy) {
  app.add_option("--failure-policy-once-ready", policy,
                 "Once ready, set failurePolicy to this (only Fail) on every entry of the "
                 "webhook configurations that has Ignore; never the other way; empty: off. A "
                 "configuration annotated certctl.io/hold-failure-policy is left alone")
      ->check(CLI::IsMember({"Fail"}))
      ->type_name("POLICY");
}

pki::CaRequest MakeCaRequest(const IssuanceFlags& flags, const pki::ServiceIdentity& identity) {
  pki::CaRequest request;
  if (!flags.ca_name.empty()) {
    request.common_name = flags.ca_name;
  } else if (!identity.service.empty()) {
    request.common_name = identity.service + "-ca";
  } else {
    request.common_name = "certctl-ca";
  }
  request.organization = flags.ca_organization;
  request.key_type = flags.key_type;
  request.validity = flags.ca_validity;
  return request;
}

pki::LeafRequest MakeLeafRequest(const IssuanceFlags& flags, const pki::ServiceIdentity& identity) {
  pki::LeafRequest request;
  request.dns_names = pki::RequiredDnsNames(identity);
  request.ip_addresses = identity.ip_addresses;
  request.key_type = flags.key_type;
  request.validity = flags.cert_validity;
  return request;
}

}  // namespace certctl::cli
