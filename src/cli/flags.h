#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "certctl/pki/issue.h"
#include "certctl/pki/key.h"
#include "certctl/pki/names.h"
#include "certctl/util/host_port.h"
#include "certctl/util/result.h"

namespace certctl::cli {

inline constexpr char kDefaultSecretName[] = "webhook-server-cert";

// Checks for flags naming a Kubernetes object of `kind` ("Secret", "Lease", ...), as the API
// server would check the name: a bad value is a usage error while parsing, naming the flag,
// the value and the rule. Objects in general are DNS-1123 subdomains, namespaces labels.
CLI::Validator ObjectNameCheck(const std::string& kind);
CLI::Validator NamespaceNameCheck();
// Checks for a flag taking a label selector, parsed as the API server parses one. With
// `blank_matches` ("webhook configuration"), a blank selector, which the API server reads as
// "everything", is refused: it would reach every such object in the cluster.
CLI::Validator LabelSelectorCheck(const std::string& blank_matches = "");

// Adds a flag that takes a duration ("720h", "30d", "10y"); a bad value is a usage error
// raised while parsing, so it exits 2 like any other. A value that parses but likely means
// something else ("1y6m": minutes, not months) leaves a warning for TakeFlagWarnings.
CLI::Option* AddDurationFlag(CLI::App& app, const std::string& name, std::chrono::seconds& target,
                             const std::string& description, bool allow_zero = false);

// The warnings the flags parsed so far left, each naming its flag; taking them clears them.
std::vector<std::string> TakeFlagWarnings();

// What a command does with the names it is given, and where its namespace comes from: each
// has its own help text, so the help of a command that only checks never says it writes.
enum class IdentityRole {
  kIssueOffline,    // generate: the names go into new certificates; namespace -n, $POD_NAMESPACE
  kIssueInCluster,  // job, run, rotate: into the Secret's certificates; namespace as kubectl
  kCheck,           // check: the certificates must cover them; files or a Secret
  kWaitOffline,     // wait: the folder's certificate must cover them
};

// --service, -n/--namespace, --cluster-domain, --dns-name, --ip.
struct IdentityFlags {
  std::string service;
  std::string namespace_name;  // empty: resolved by ResolveIdentity
  std::string cluster_domain = pki::kDefaultClusterDomain;
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;
};
void AddIdentityFlags(CLI::App& app, IdentityFlags& flags, IdentityRole role);

// Offline commands resolve the namespace from -n, then $POD_NAMESPACE, then "default"; the
// last is logged, as a user who forgot -n would not otherwise know.
pki::ServiceIdentity ResolveIdentity(const IdentityFlags& flags);

// True when the flags name at least one DNS name or IP to check for.
bool HasIdentity(const IdentityFlags& flags);

// --key-type, --ca-validity, --cert-validity, --ca-name, --ca-organization.
struct IssuanceFlags {
  pki::KeyType key_type = pki::KeyType::kEcdsaP256;
  std::chrono::seconds ca_validity{std::chrono::hours(24 * 365 * 10)};
  std::chrono::seconds cert_validity{std::chrono::hours(24 * 365 * 10)};
  std::string ca_name;  // empty: "<service>-ca", or "certctl-ca" without a service
  std::string ca_organization;
};
// --key-type, --ca-validity, --cert-validity, --ca-organization and, `with_ca_name`, --ca-name.
void AddIssuanceFlags(CLI::App& app, IssuanceFlags& flags, bool with_ca_name = true);

// --serving-addr HOST:PORT: the webhook's own listener, for the handshake the API server
// makes. Parse with ParseServingAddress: a usage error names the flag.
void AddServingAddressFlag(CLI::App& app, std::string& address, const std::string& description);
Result<std::optional<HostPort>> ParseServingAddress(const std::string& text);

// --failure-policy-once-ready Fail (off when empty): set failurePolicy Fail on the webhook
// entries with Ignore once certctl is ready.
void AddFailurePolicyOnceReadyFlag(CLI::App& app, std::string& policy);

pki::CaRequest MakeCaRequest(const IssuanceFlags& flags, const pki::ServiceIdentity& identity);
pki::LeafRequest MakeLeafRequest(const IssuanceFlags& flags, const pki::ServiceIdentity& identity);

}  // namespace certctl::cli
