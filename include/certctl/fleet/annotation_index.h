// Which Secrets the annotated objects ask for, kept for them alone: every Service and target
// without certctl's annotations costs nothing here. An event on a Service or target changes
// its entry and says which Secrets must be reconciled again; a reconcile asks which Service
// issues the Secret and which targets inject from it.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "certctl/fleet/requests.h"

namespace certctl::fleet {

// What the annotations ask of one Secret, copied out of the index for a worker.
struct SecretRequests {
  std::string secret;                         // "ns/name"
  std::optional<CertificateRequest> issuing;  // the Service that issues it
  std::vector<std::string> outnumbered;       // other Services asking for it ("ns/name")
  std::vector<InjectionRequest> injecting;    // the targets that inject from it

  bool named() const { return issuing.has_value() || !injecting.empty(); }
};

class AnnotationIndex {
 public:
  // The Service `key` ("ns/name") asks for `request` now (none: for nothing). Returns the
  // Secrets ("ns/name") to reconcile again: the one it asked for before and the one now.
  std::vector<std::string> SetService(const std::string& key,
                                      std::optional<CertificateRequest> request);
  // The same for the target `key` (controller::TargetObjectName).
  std::vector<std::string> SetTarget(const std::string& key,
                                     std::optional<InjectionRequest> request);

  // The Service that issues `secret`: the first by key when several ask for it.
  std::optional<CertificateRequest> Issuing(const std::string& secret) const;
  // Services that ask for `secret` beyond the one that issues it ("ns/name").
  std::vector<std::string> OutnumberedServices(const std::string& secret) const;
  // The targets that inject from `secret`, by key.
  std::vector<InjectionRequest> Injecting(const std::string& secret) const;
  // Whether any annotation names `secret`: the controller reads no other Secret.
  bool Named(const std::string& secret) const;
  // Every Secret an annotation names, in order.
  std::vector<std::string> Secrets() const;
  // All of the above about `secret`.
  SecretRequests RequestsFor(const std::string& secret) const;

  // After a (re)list of Services in `ns` (empty: every namespace): those in the index that
  // were not listed are removed. Returns the Secrets to reconcile again.
  std::vector<std::string> KeepServices(const std::string& ns, const std::set<std::string>& listed);
  // The same for targets of `kind`.
  std::vector<std::string> KeepTargets(inject::TargetKind kind,
                                       const std::set<std::string>& listed);

  std::size_t service_count() const { return services_.size(); }
  std::size_t target_count() const { return targets_.size(); }

 private:
  std::map<std::string, CertificateRequest> services_;
  std::map<std::string, InjectionRequest> targets_;
  std::map<std::string, std::set<std::string>> issuing_;    // Secret → Service keys
  std::map<std::string, std::set<std::string>> injecting_;  // Secret → target keys
};

}  // namespace certctl::fleet
