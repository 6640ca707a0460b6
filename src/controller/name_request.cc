#include "certctl/controller/name_request.h"

#include <algorithm>

#include "certctl/controller/secret.h"
#include "certctl/util/duration.h"
#include "certctl/util/text.h"

namespace certctl::controller {
namespace {

using Json = nlohmann::json;

constexpr int kMaxNameAttempts = 5;

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string_view TrimSpaces(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) {
    return {};
  }
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

std::vector<std::string> SplitNames(std::string_view text) {
  std::vector<std::string> names;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    std::string name(TrimSpaces(text.substr(0, comma)));
    if (!name.empty() && !Contains(names, name)) {
      names.push_back(std::move(name));
    }
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  return names;
}

bool IsIpAddress(std::string_view name) { return static_cast<bool>(pki::ValidateIpAddress(name)); }

}  // namespace

Result<NameRequestReading> ReadNameRequest(const Json& secret, const std::string& object,
                                           TimePoint now) {
  NameRequestReading reading;
  auto names = SecretAnnotation(secret, object, kRequestedNamesAnnotation);
  if (!names) {
    return Fail(names.error());
  }
  auto at = TimeAnnotation(secret, object, kNamesRequestedAtAnnotation, reading.problems);
  if (!at) {
    return Fail(at.error());
  }
  if (!*names || !*at) {
    if (*names && !*at && reading.problems.empty()) {
      reading.problems.push_back(IgnoredAnnotation(
          kRequestedNamesAnnotation, **names,
          std::string("a time in ") + kNamesRequestedAtAnnotation + " beside it"));
    }
    return reading;
  }
  if (**at > now + std::chrono::minutes(5)) {  // beyond any clock skew: not one of ours
    reading.problems.push_back(IgnoredAnnotation(kNamesRequestedAtAnnotation, FormatRfc3339(**at),
                                                 "a time not in the future"));
    return reading;
  }
  if (now - **at > kNameRequestLifetime) {
    return reading;
  }
  NameRequest request{.names = {}, .at = **at};
  std::vector<std::string> refused;
  for (std::string& name : SplitNames(**names)) {
    if (IsIpAddress(name) || pki::ValidateDnsName(name, pki::Wildcard::kAllow)) {
      request.names.push_back(std::move(name));
    } else {
      refused.push_back(std::move(name));
    }
  }
  if (!refused.empty()) {
    reading.problems.push_back(IgnoredAnnotation(kRequestedNamesAnnotation, JoinWithCommas(refused),
                                                 "DNS names and IP addresses; those are left out"));
  }
  if (!request.names.empty()) {
    reading.request = std::move(request);
  }
  return reading;
}

pki::ServiceIdentity WithRequestedNames(pki::ServiceIdentity identity, const NameRequest& request) {
  const std::vector<std::string> required = pki::RequiredDnsNames(identity);
  for (const std::string& name : request.names) {
    if (IsIpAddress(name)) {
      if (!Contains(identity.ip_addresses, name)) {
        identity.ip_addresses.push_back(name);
      }
    } else if (!Contains(required, name) && !Contains(identity.extra_dns_names, name)) {
      identity.extra_dns_names.push_back(name);
    }
  }
  return identity;
}

pki::ServiceIdentity WithNamesStillCalled(pki::ServiceIdentity identity,
                                          const pki::CertificateInfo& stored_leaf,
                                          const std::vector<std::string>& called_hosts) {
  std::vector<std::string> kept;
  for (const std::string& host : called_hosts) {
    if (!pki::SansCoverHost(stored_leaf.dns_names, stored_leaf.ip_addresses, host)) {
      continue;
    }
    kept.push_back(host);
    // A Service's name goes with its other forms, as --service issues them, where the stored
    // leaf has them: a replica still running with the old --service finds all of its own.
    const std::string_view svc_suffix = ".svc";
    if (host.size() > svc_suffix.size() && host.ends_with(svc_suffix)) {
      const std::string_view service_and_ns =
          std::string_view(host).substr(0, host.size() - svc_suffix.size());
      const std::size_t dot = service_and_ns.find('.');
      if (dot != std::string_view::npos && service_and_ns.find('.', dot + 1) == std::string::npos) {
        pki::ServiceIdentity service;
        service.service = std::string(service_and_ns.substr(0, dot));
        service.namespace_name = std::string(service_and_ns.substr(dot + 1));
        service.cluster_domain = identity.cluster_domain;
        for (std::string& form : pki::RequiredDnsNames(service)) {
          if (Contains(stored_leaf.dns_names, form)) {
            kept.push_back(std::move(form));
          }
        }
      }
    }
  }
  for (std::string& name : kept) {
    const bool required =
        pki::SansCoverHost(pki::RequiredDnsNames(identity), identity.ip_addresses, name);
    std::vector<std::string>& names =
        IsIpAddress(name) ? identity.ip_addresses : identity.extra_dns_names;
    if (!required && !Contains(names, name)) {
      names.push_back(std::move(name));
    }
  }
  return identity;
}

std::vector<std::string> NamesNotCovered(const pki::ServiceIdentity& identity,
                                         const pki::CertificateInfo& leaf) {
  std::vector<std::string> missing;
  std::vector<std::string> wanted = pki::RequiredDnsNames(identity);
  wanted.insert(wanted.end(), identity.ip_addresses.begin(), identity.ip_addresses.end());
  for (std::string& name : wanted) {
    if (!pki::SansCoverHost(leaf.dns_names, leaf.ip_addresses, name)) {
      missing.push_back(std::move(name));
    }
  }
  return missing;
}

Result<NameRequest> RequestNames(kube::Client& client, std::string_view ns, std::string_view name,
                                 const std::vector<std::string>& names, TimePoint now) {
  const std::string object = SecretObjectName(ns, name);
  for (int attempt = 0; attempt < kMaxNameAttempts; ++attempt) {
    auto current = client.Get(kube::kSecrets, ns, name);
    if (!current) {
      return Fail(current.error().Wrap("get " + object));
    }
    if (!current->has_value()) {
      return Fail(ErrorCode::kNotFound, object + " does not exist: there is nothing to ask for");
    }
    Json secret = std::move(**current);
    if (auto pair = ReadSecretPair(secret); !pair) {
      return Fail(pair.error());
    }
    auto reading = ReadNameRequest(secret, object, now);
    if (!reading) {
      return Fail(reading.error());
    }
    NameRequest request = reading->request.value_or(NameRequest{.names = {}, .at = now});
    bool added = false;
    for (const std::string& wanted : names) {
      if (!Contains(request.names, wanted)) {
        request.names.push_back(wanted);
        added = true;
      }
    }
    if (!added) {
      return request;  // asked already, by this replica or another
    }
    request.at = now;
    Json& metadata = secret["metadata"];
    if (!metadata.contains("annotations") || !metadata["annotations"].is_object()) {
      metadata["annotations"] = Json::object();
    }
    metadata["annotations"][kRequestedNamesAnnotation] = JoinWithCommas(request.names);
    metadata["annotations"][kNamesRequestedAtAnnotation] = FormatRfc3339(now);
    auto updated = client.Update(kube::kSecrets, ns, name, secret);
    if (updated) {
      return request;
    }
    if (updated.error().code() != ErrorCode::kConflict) {
      return Fail(updated.error().Wrap("update " + object));
    }
  }
  return Fail(ErrorCode::kConflict,
              object + " kept changing while asking for names; the next pass asks again");
}

}  // namespace certctl::controller
