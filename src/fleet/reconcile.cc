#include "certctl/fleet/reconcile.h"

#include "certctl/controller/secret.h"
#include "certctl/pki/certificate.h"
#include "certctl/util/base64.h"

namespace certctl::fleet {
namespace {

using Json = nlohmann::json;

controller::ObjectReference ServiceReference(const std::string& ns, const std::string& name,
                                             const std::string& uid) {
  return {"v1", "Service", ns, name, uid};
}

void Select(const InjectionRequest& request, controller::TargetSelection& selection) {
  switch (request.kind) {
    case inject::TargetKind::kValidatingWebhookConfiguration:
      selection.validating_webhooks.push_back(request.name);
      break;
    case inject::TargetKind::kMutatingWebhookConfiguration:
      selection.mutating_webhooks.push_back(request.name);
      break;
    case inject::TargetKind::kCustomResourceDefinition:
      selection.crds.push_back(request.name);
      break;
    case inject::TargetKind::kApiService:
      selection.api_services.push_back(request.name);
      break;
  }
}

bool FromCertManager(const InjectionRequest& request) {
  return std::string_view(request.annotation) == kCertManagerInjectCaFromSecretAnnotation;
}

// The targets that may inject from `secret_object` (read as `secret`, absent: nullptr): those
// asking with cert-manager's annotation only when it allows direct injection.
controller::TargetSelection Allowed(const std::vector<InjectionRequest>& targets,
                                    const Json* secret, const std::string& secret_object,
                                    std::vector<Problem>& problems) {
  controller::TargetSelection selection;
  const bool allowed = secret != nullptr && AllowsDirectInjection(*secret);
  for (const InjectionRequest& request : targets) {
    if (FromCertManager(request) && !allowed) {
      problems.push_back({TargetReference(request), "DirectInjectionNotAllowed",
                          std::string(kCertManagerInjectCaFromSecretAnnotation) + " names " +
                              secret_object + ", which does not carry " +
                              kAllowDirectInjectionAnnotation +
                              ": \"true\" (cainjector's rule); nothing was injected"});
      continue;
    }
    Select(request, selection);
  }
  return selection;
}

// The ca.crt of a Secret only injected from; none, told in `problems`, when it has no
// certificate there.
std::optional<std::string> SourceBundle(const Json& secret, const std::string& secret_object,
                                        const std::vector<InjectionRequest>& targets,
                                        std::vector<Problem>& problems) {
  std::optional<std::string> pem;
  if (const Json::json_pointer key("/data/ca.crt");
      secret.contains(key) && secret[key].is_string()) {
    if (auto decoded = Base64Decode(secret[key].get<std::string>()); decoded) {
      if (auto bundle = pki::ParseCertificateBundle(*decoded); bundle && !bundle->empty()) {
        pem = std::move(*decoded);
      }
    }
  }
  if (!pem) {
    for (const InjectionRequest& request : targets) {
      problems.push_back({TargetReference(request), "InjectionSourceInvalid",
                          std::string(request.annotation) + " names " + secret_object +
                              ", whose ca.crt holds no certificate; nothing was injected"});
    }
  }
  return pem;
}

}  // namespace

controller::ObjectReference TargetReference(const InjectionRequest& request) {
  static constexpr const char* kApiVersions[] = {
      "admissionregistration.k8s.io/v1", "admissionregistration.k8s.io/v1",
      "apiextensions.k8s.io/v1", "apiregistration.k8s.io/v1"};
  return {kApiVersions[static_cast<int>(request.kind)],
          std::string(inject::TargetKindName(request.kind)), "", request.name, request.uid};
}

controller::SecretSpec SpecFor(const CertificateRequest& request, const IssueSettings& settings) {
  controller::SecretSpec spec;
  spec.ns = request.ns;
  spec.name = request.secret;
  spec.identity.service = request.service;
  spec.identity.namespace_name = request.ns;
  spec.identity.cluster_domain = settings.cluster_domain;
  for (const std::string& name : request.dns_names) {
    if (pki::ValidateIpAddress(name)) {
      spec.identity.ip_addresses.push_back(name);
    } else {
      spec.identity.extra_dns_names.push_back(name);
    }
  }
  spec.ca.common_name = request.service + "-ca";
  spec.ca.organization = settings.ca_organization;
  spec.ca.key_type = settings.key_type;
  spec.ca.validity = settings.ca_validity;
  spec.leaf_key_type = settings.key_type;
  spec.leaf_validity = settings.cert_validity;
  spec.renew_before = settings.renew_before;
  spec.ca_overlap = settings.ca_overlap;
  spec.issuer = settings.issuer;
  spec.labels[kServingCertForLabel] = request.service;
  return spec;
}

Result<SecretReconcile> ReconcileSecret(kube::Client& client, const SecretRequests& requests,
                                        const IssueSettings& settings, const Clock& clock,
                                        const loop::PassConfig& hooks) {
  const std::string& secret = requests.secret;
  SecretReconcile result;
  result.secret = secret;
  if (!requests.named()) {
    return result;
  }
  const std::size_t slash = secret.find('/');
  const std::string ns = secret.substr(0, slash);
  const std::string name = secret.substr(slash + 1);
  const std::string secret_object = controller::SecretObjectName(ns, name);
  const std::vector<InjectionRequest>& targets = requests.injecting;
  const auto& issuing = requests.issuing;
  if (issuing) {
    for (const std::string& service : requests.outnumbered) {
      const std::string service_name = service.substr(service.find('/') + 1);
      result.problems.push_back({ServiceReference(ns, service_name, ""), "SecretClaimed",
                                 std::string(kServingCertSecretAnnotation) + " asks for " +
                                     secret_object + ", which service/" + ns + "/" +
                                     issuing->service +
                                     " already asks for; each Service needs a Secret of its own"});
    }
  }

  // Read first only when something depends on the Secret as it stands: a target asking with
  // cert-manager's annotation, or a Secret nobody here issues.
  const bool any_cert_manager = std::any_of(targets.begin(), targets.end(), FromCertManager);
  std::optional<Json> stored;
  if (!issuing || any_cert_manager) {
    auto read = client.Get(kube::kSecrets, ns, name);
    if (!read) {
      return Fail(read.error().Wrap("get " + secret_object));
    }
    stored = std::move(*read);
  }
  controller::TargetSelection selection =
      Allowed(targets, stored ? &*stored : nullptr, secret_object, result.problems);

  if (issuing) {
    loop::PassConfig pass = hooks;
    pass.secret = SpecFor(*issuing, settings);
    pass.targets = std::move(selection);
    auto report = loop::Reconcile(client, pass, loop::Role::kLeader, clock);
    if (!report) {
      if (report.error().code() == ErrorCode::kFailedPrecondition) {
        // A Secret certctl does not manage, invalid: never overwritten, told where it was
        // asked for.
        result.problems.push_back({ServiceReference(issuing->ns, issuing->service, issuing->uid),
                                   "SecretNotManaged", report.error().message()});
        return result;
      }
      return Fail(report.error());
    }
    if (!report->secret_managed) {
      result.problems.push_back(
          {ServiceReference(issuing->ns, issuing->service, issuing->uid), "SecretNotManaged",
           secret_object +
               " exists and certctl does not manage it: it is left as it is and its ca.crt "
               "injected; delete it for certctl to issue one, or name another Secret in " +
               kServingCertSecretAnnotation});
    }
    result.pass = std::move(*report);
    return result;
  }

  if (!stored) {
    for (const InjectionRequest& request : targets) {
      result.problems.push_back({TargetReference(request), "InjectionSourceMissing",
                                 std::string(request.annotation) + " names " + secret_object +
                                     ", which does not exist; nothing was injected"});
    }
    return result;
  }
  auto bundle = SourceBundle(*stored, secret_object, targets, result.problems);
  if (!bundle || selection.empty()) {
    return result;
  }
  controller::InjectOptions options;
  options.wait_for_targets = std::chrono::seconds(0);
  options.leave_out_missing = true;
  auto injected = controller::InjectBundle(client, selection, *bundle, options, clock);
  if (!injected) {
    return Fail(injected.error());
  }
  result.injected = std::move(*injected);
  return result;
}

}  // namespace certctl::fleet
