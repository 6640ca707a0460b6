#include "certctl/fleet/annotation_index.h"

namespace certctl::fleet {
namespace {

// Moves `key` in `by_secret` from the Secret `before` to the Secret `after` (either may be
// empty) and lists both as changed.
void Move(std::map<std::string, std::set<std::string>>& by_secret, const std::string& key,
          const std::string& before, const std::string& after, std::vector<std::string>& changed) {
  if (!before.empty()) {
    auto found = by_secret.find(before);
    if (found != by_secret.end()) {
      found->second.erase(key);
      if (found->second.empty()) {
        by_secret.erase(found);
      }
    }
    changed.push_back(before);
  }
  if (!after.empty()) {
    by_secret[after].insert(key);
    if (after != before) {
      changed.push_back(after);
    }
  }
}

}  // namespace

std::vector<std::string> AnnotationIndex::SetService(const std::string& key,
                                                     std::optional<CertificateRequest> request) {
  std::string before;
  if (auto found = services_.find(key); found != services_.end()) {
    if (request && *request == found->second) {
      return {};
    }
    before = NamespacedKey(found->second.ns, found->second.secret);
    services_.erase(found);
  }
  const std::string after = request ? NamespacedKey(request->ns, request->secret) : "";
  if (request) {
    services_.emplace(key, std::move(*request));
  }
  std::vector<std::string> changed;
  Move(issuing_, key, before, after, changed);
  return changed;
}

std::vector<std::string> AnnotationIndex::SetTarget(const std::string& key,
                                                    std::optional<InjectionRequest> request) {
  std::string before;
  if (auto found = targets_.find(key); found != targets_.end()) {
    if (request && *request == found->second) {
      return {};
    }
    before = NamespacedKey(found->second.secret_ns, found->second.secret);
    targets_.erase(found);
  }
  const std::string after = request ? NamespacedKey(request->secret_ns, request->secret) : "";
  if (request) {
    targets_.emplace(key, std::move(*request));
  }
  std::vector<std::string> changed;
  Move(injecting_, key, before, after, changed);
  return changed;
}

std::optional<CertificateRequest> AnnotationIndex::Issuing(const std::string& secret) const {
  const auto found = issuing_.find(secret);
  if (found == issuing_.end() || found->second.empty()) {
    return std::nullopt;
  }
  return services_.at(*found->second.begin());
}

std::vector<std::string> AnnotationIndex::OutnumberedServices(const std::string& secret) const {
  const auto found = issuing_.find(secret);
  if (found == issuing_.end() || found->second.size() < 2) {
    return {};
  }
  return {std::next(found->second.begin()), found->second.end()};
}

std::vector<InjectionRequest> AnnotationIndex::Injecting(const std::string& secret) const {
  std::vector<InjectionRequest> requests;
  if (const auto found = injecting_.find(secret); found != injecting_.end()) {
    for (const std::string& key : found->second) {
      requests.push_back(targets_.at(key));
    }
  }
  return requests;
}

bool AnnotationIndex::Named(const std::string& secret) const {
  return issuing_.contains(secret) || injecting_.contains(secret);
}

std::vector<std::string> AnnotationIndex::Secrets() const {
  std::set<std::string> secrets;
  for (const auto* by_secret : {&issuing_, &injecting_}) {
    for (const auto& [secret, keys] : *by_secret) {
      secrets.insert(secret);
    }
  }
  return {secrets.begin(), secrets.end()};
}

SecretRequests AnnotationIndex::RequestsFor(const std::string& secret) const {
  return SecretRequests{.secret = secret,
                        .issuing = Issuing(secret),
                        .outnumbered = OutnumberedServices(secret),
                        .injecting = Injecting(secret)};
}

std::vector<std::string> AnnotationIndex::KeepServices(const std::string& ns,
                                                       const std::set<std::string>& listed) {
  std::vector<std::string> gone;
  for (const auto& [key, request] : services_) {
    if ((ns.empty() || request.ns == ns) && !listed.contains(key)) {
      gone.push_back(key);
    }
  }
  std::vector<std::string> changed;
  for (const std::string& key : gone) {
    for (std::string& secret : SetService(key, std::nullopt)) {
      changed.push_back(std::move(secret));
    }
  }
  return changed;
}

std::vector<std::string> AnnotationIndex::KeepTargets(inject::TargetKind kind,
                                                      const std::set<std::string>& listed) {
  std::vector<std::string> gone;
  for (const auto& [key, request] : targets_) {
    if (request.kind == kind && !listed.contains(key)) {
      gone.push_back(key);
    }
  }
  std::vector<std::string> changed;
  for (const std::string& key : gone) {
    for (std::string& secret : SetTarget(key, std::nullopt)) {
      changed.push_back(std::move(secret));
    }
  }
  return changed;
}

}  // namespace certctl::fleet
