#include "certctl/audit/audit.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include "certctl/controller/callable.h"
#include "certctl/controller/targets.h"
#include "certctl/fleet/requests.h"
#include "certctl/inject/called_names.h"
#include "certctl/inject/targets.h"
#include "certctl/pki/certificate.h"
#include "certctl/util/base64.h"
#include "certctl/util/duration.h"
#include "certctl/util/text.h"

#include "audit/admission_rules.h"

namespace certctl::audit {
namespace {

using inject::TargetKind;
using ServiceKey = std::pair<std::string, std::string>;  // namespace, name

constexpr int kPageSize = 500;
// Names from the cluster are shown on one line and cut at this length.
constexpr std::size_t kMaxShown = 256;

// An entry while the audit goes on: its report, and what the later steps need of it.
struct Pending {
  AuditedEntry entry;
  std::string object;  // "validatingwebhookconfiguration/x"
  std::optional<inject::ServiceReference> service;
  // An unreachable Service refuses every matching request under Fail (and every request
  // routed to a conversion webhook or an APIService); under Ignore it only skips the check.
  Severity unreachable = Severity::kCritical;
  // For --handshake: the caBundle when a certificate of it is valid, the name the API server
  // verifies, where it connects and how long it waits.
  std::string bundle_pem;
  std::string server_name;
  bool verified = true;
  std::vector<HostPort> dial;
  int timeout_seconds = internal::kDefaultTimeoutSeconds;
};

struct Inventory {
  std::vector<Pending> entries;
  std::vector<internal::AdmissionHook> hooks;
  std::vector<std::string> notes;
};

void Add(Pending& pending, FindingCode code, Severity severity, std::string message) {
  pending.entry.findings.push_back(
      {code, severity, pending.object, pending.entry.entry, std::move(message)});
}

// "webhooks[1].clientConfig" -> "/webhooks/1/clientConfig/caBundle"; "spec" (an APIService)
// -> "/spec/caBundle".
std::string BundlePointer(const std::string& field) {
  std::string pointer = "/";
  for (char c : field) {
    pointer += c == '.' || c == '[' ? '/' : c;
  }
  pointer.erase(std::remove(pointer.begin(), pointer.end(), ']'), pointer.end());
  return pointer + "/caBundle";
}

// The caBundle of one entry: how many certificates, the earliest end, and its findings.
void JudgeBundle(const kube::Json& object, const inject::CalledEndpoint& endpoint, TimePoint now,
                 std::chrono::seconds renew_before, Pending& pending) {
  const kube::Json::json_pointer pointer(BundlePointer(endpoint.field));
  const kube::Json* field = object.contains(pointer) ? &object.at(pointer) : nullptr;
  if (field == nullptr || field->is_null() || (field->is_string() && field->empty())) {
    if (endpoint.service && endpoint.verified) {
      Add(pending, FindingCode::kCaBundleMissing, Severity::kCritical,
          "calls a Service with no caBundle: the API server trusts nothing for it, so every "
          "call fails its TLS check");
    }
    return;  // a URL without a caBundle is verified against the API server's own roots
  }
  auto decoded = field->is_string()
                     ? Base64Decode(field->get<std::string>())
                     : Result<std::string>(Fail(ErrorCode::kInvalidArgument, "it is not a string"));
  auto certificates = decoded ? pki::ParseCertificateBundle(*decoded)
                              : Result<std::vector<pki::Certificate>>(Fail(decoded.error()));
  if (!certificates) {
    Add(pending, FindingCode::kCaBundleUnparsable, Severity::kCritical,
        "the caBundle holds no certificate the API server can read (" +
            OneLine(certificates.error().message(), kMaxShown) + ")");
    return;
  }
  pending.entry.bundle_certificates = static_cast<int>(certificates->size());
  std::optional<TimePoint> latest_valid;
  for (const pki::Certificate& certificate : *certificates) {
    const pki::CertificateInfo info = certificate.Info();
    if (!pending.entry.bundle_not_after || info.not_after < *pending.entry.bundle_not_after) {
      pending.entry.bundle_not_after = info.not_after;
    }
    if (info.not_before <= now && now < info.not_after &&
        (!latest_valid || info.not_after > *latest_valid)) {
      latest_valid = info.not_after;
    }
  }
  if (!latest_valid) {
    Add(pending, FindingCode::kCaBundleExpired, Severity::kCritical,
        "no certificate of the caBundle is valid now (the earliest ended " +
            FormatRfc3339(*pending.entry.bundle_not_after) +
            "): every call fails the API server's TLS check");
    return;
  }
  pending.bundle_pem = std::move(*decoded);
  if (*latest_valid - now < renew_before) {
    Add(pending, FindingCode::kCaBundleExpiringSoon, Severity::kWarning,
        "every certificate of the caBundle ends by " + FormatRfc3339(*latest_valid) + ", within " +
            FormatDuration(renew_before) + "; calls fail from then on unless it is renewed");
  }
}

std::string FailurePolicy(const kube::Json& webhook) {
  const auto it = webhook.find("failurePolicy");
  return it != webhook.end() && it->is_string() ? it->get<std::string>() : "Fail";
}

int TimeoutSeconds(const kube::Json& webhook) {
  const auto it = webhook.find("timeoutSeconds");
  return it != webhook.end() && it->is_number_integer() ? it->get<int>()
                                                        : internal::kDefaultTimeoutSeconds;
}

// Judges what can be judged of one object on its own, and keeps what the later steps need.
void Take(TargetKind kind, const kube::Json& object, TimePoint now,
          std::chrono::seconds renew_before, Inventory& inventory) {
  auto name = kube::ObjectName(object, "list " + std::string(inject::TargetKindName(kind)));
  if (!name) {
    inventory.notes.push_back(name.error().message());
    return;
  }
  const std::string object_name = controller::TargetObjectName(kind, *name);
  const bool webhooks = kind == TargetKind::kValidatingWebhookConfiguration ||
                        kind == TargetKind::kMutatingWebhookConfiguration;
  const kube::Json* entries = nullptr;
  if (webhooks) {
    const auto it = object.find("webhooks");
    entries = it != object.end() && it->is_array() ? &*it : nullptr;
  }
  // Both annotations are read, whichever controller honours them: the report says who asks.
  const auto injection = fleet::ReadInjectionRequest(kind, object, true).request;
  for (const inject::CalledEndpoint& endpoint : inject::ReadCalledEndpoints(kind, object)) {
    Pending pending;
    if (injection) {
      pending.entry.injection_annotation = injection->annotation;
      pending.entry.injected_from = fleet::NamespacedKey(injection->secret_ns, injection->secret);
    }
    pending.object = object_name;
    pending.entry.kind = std::string(inject::TargetKindName(kind));
    pending.entry.name = *name;
    pending.entry.entry = controller::EntryLabel(endpoint);
    pending.entry.calls = endpoint.Calls();
    pending.service = endpoint.service;
    pending.server_name = endpoint.host;
    pending.verified = endpoint.verified;
    if (!endpoint.url.empty() && endpoint.problem.empty()) {
      if (auto address = inject::UrlAddress(endpoint.url); address && address->port > 0) {
        pending.dial.push_back(std::move(*address));
      }
    }
    const kube::Json* webhook = entries != nullptr && endpoint.index < entries->size() &&
                                        (*entries)[endpoint.index].is_object()
                                    ? &(*entries)[endpoint.index]
                                    : nullptr;
    if (webhook != nullptr) {
      pending.entry.failure_policy = FailurePolicy(*webhook);
      pending.timeout_seconds = TimeoutSeconds(*webhook);
      pending.unreachable =
          pending.entry.failure_policy == "Fail" ? Severity::kCritical : Severity::kWarning;
    }
    if (!endpoint.problem.empty()) {
      Add(pending, FindingCode::kTargetInvalid, Severity::kCritical,
          OneLine(endpoint.problem, kMaxShown));
    } else {
      JudgeBundle(object, endpoint, now, renew_before, pending);
    }
    if (webhook != nullptr) {
      if (endpoint.service && pending.entry.failure_policy == "Fail" &&
          internal::InterceptsPodCreation(*webhook, endpoint.service->ns)) {
        Add(pending, FindingCode::kSelfDeadlock, Severity::kWarning,
            "fails closed and intercepts the creation of Pods in " + endpoint.service->ns +
                ", where its own Service is: once its pods are gone none can be created again "
                "(exclude that namespace with a namespaceSelector, or use Ignore)");
      }
      inventory.hooks.push_back({object_name, pending.entry.entry,
                                 kind == TargetKind::kMutatingWebhookConfiguration,
                                 pending.timeout_seconds, internal::ReadRules(*webhook)});
    }
    inventory.entries.push_back(std::move(pending));
  }
}

// Whether an object of `kind` calls anything: every webhook configuration, a CRD with a
// Webhook conversion, an APIService with a Service (a local one is served by the API server).
bool CallsOut(TargetKind kind, const kube::Json& object) {
  if (kind == TargetKind::kCustomResourceDefinition) {
    const kube::Json::json_pointer strategy("/spec/conversion/strategy");
    return object.contains(strategy) && object.at(strategy) == "Webhook";
  }
  if (kind == TargetKind::kApiService) {
    const kube::Json::json_pointer service("/spec/service");
    return object.contains(service) && object.at(service).is_object();
  }
  return true;
}

// The Services the entries call and their EndpointSlices, a page at a time, keeping only
// those. nullopt where the credentials may not read them.
struct Reachability {
  std::optional<std::map<ServiceKey, kube::Json>> services;
  std::optional<std::map<ServiceKey, kube::Json>> slices;  // arrays of EndpointSlices
};

bool Unreadable(const Error& error) {
  return error.code() == ErrorCode::kPermissionDenied || error.code() == ErrorCode::kNotFound;
}

// Lists `type` in every namespace a page at a time and hands on each item whose namespace and
// the string at `service_at` (its own name, or the Service it belongs to) name a called
// Service; the rest is dropped with its page.
Status ListCalled(kube::Client& client, const kube::ResourceType& type, const char* service_at,
                  const std::set<ServiceKey>& called,
                  const std::function<void(ServiceKey, kube::Json&)>& keep) {
  kube::ListOptions options;
  options.page_size = kPageSize;
  const kube::Json::json_pointer ns("/metadata/namespace");
  const kube::Json::json_pointer service(service_at);
  return client.ListPages(type, "", options, [&](kube::Json& items) -> Status {
    for (kube::Json& item : items) {
      if (item.contains(ns) && item.contains(service) && item.at(ns).is_string() &&
          item.at(service).is_string()) {
        ServiceKey key{item.at(ns).get<std::string>(), item.at(service).get<std::string>()};
        if (called.contains(key)) {
          keep(std::move(key), item);
        }
      }
    }
    return {};
  });
}

Result<Reachability> ReadReachability(kube::Client& client, const std::set<ServiceKey>& called,
                                      std::vector<std::string>& notes) {
  Reachability read;
  if (called.empty()) {
    return read;
  }
  // A refusal leaves the rest unjudged with a note; any other failure stops the audit.
  const auto unread = [&](const Status& listed, const kube::ResourceType& type,
                          const std::string& kind, const std::string& unjudged) -> Status {
    if (!Unreadable(listed.error())) {
      return Fail(listed.error().Wrap("list " + std::string(type.resource)));
    }
    notes.push_back("could not list " + kind + " (" + listed.error().message() + "), so " +
                    unjudged + " was not checked");
    return {};
  };
  std::map<ServiceKey, kube::Json> services;
  if (auto listed = ListCalled(client, kube::kServices, "/metadata/name", called,
                               [&](ServiceKey key, kube::Json& item) {
                                 services.emplace(std::move(key), std::move(item));
                               });
      !listed) {
    if (auto failed = unread(listed, kube::kServices, "Services",
                             "whether the API server can reach the webhooks");
        !failed) {
      return Fail(failed.error());
    }
    return read;
  }
  read.services = std::move(services);

  std::map<ServiceKey, kube::Json> slices;
  if (auto listed = ListCalled(
          client, kube::kEndpointSlices, "/metadata/labels/kubernetes.io~1service-name", called,
          [&](ServiceKey key, kube::Json& item) {
            auto [it, added] = slices.try_emplace(std::move(key), kube::Json::array());
            it->second.push_back(std::move(item));
          });
      !listed) {
    if (auto failed = unread(listed, kube::kEndpointSlices, "EndpointSlices",
                             "whether the webhooks' Services have a ready endpoint");
        !failed) {
      return Fail(failed.error());
    }
    return read;
  }
  read.slices = std::move(slices);
  return read;
}

void JudgeReachability(const Reachability& read, Inventory& inventory) {
  if (!read.services) {
    return;
  }
  static const kube::Json kNoSlices = kube::Json::array();
  for (Pending& pending : inventory.entries) {
    if (!pending.service) {
      continue;
    }
    const ServiceKey key{pending.service->ns, pending.service->name};
    const std::string object = "service/" + key.first + "/" + key.second;
    const auto service = read.services->find(key);
    const kube::Json* slices = nullptr;
    if (read.slices) {
      const auto found = read.slices->find(key);
      slices = found != read.slices->end() ? &found->second : &kNoSlices;
    }
    auto reach =
        controller::JudgeServiceReach(service != read.services->end() ? &service->second : nullptr,
                                      slices, pending.service->port, object);
    if (!reach) {
      inventory.notes.push_back(reach.error().message());
      continue;
    }
    pending.dial = std::move(reach->ready_addresses);
    if (!reach->problem) {
      continue;
    }
    std::string message = "calls " + object + ", which " + reach->detail;
    message += pending.unreachable == Severity::kCritical
                   ? (pending.entry.failure_policy == "Fail"
                          ? ": with failurePolicy Fail every request it matches is refused now"
                          : ": every request the API server sends it fails now")
                   : ": with failurePolicy Ignore the requests it matches go through unchecked";
    Add(pending, *reach->problem, pending.unreachable, message);
  }
}

// One handshake to make: the same address, name and bundle are dialled once for every entry
// that calls them, waiting as long as the most patient of them.
using DialKey = std::tuple<std::string, int, std::string, std::string>;  // host, port, name, PEM

// What the served certificate tells beyond the verdict: the end of a leaf the API server
// accepts, when it is near.
void JudgeServed(Pending& pending, const HostPort& address, const probe::HandshakeOutcome& outcome,
                 TimePoint now, std::chrono::seconds renew_before) {
  auto served = pki::Certificate::FromPem(outcome.served_leaf_pem);
  if (!served) {
    return;
  }
  const TimePoint not_after = served->Info().not_after;
  if (not_after - now < renew_before) {
    Add(pending, FindingCode::kServingCertExpiringSoon, Severity::kWarning,
        FormatHostPort(address) + " serves a certificate that ends " + FormatRfc3339(not_after) +
            ", within " + FormatDuration(renew_before) +
            "; the API server refuses it from then on unless the webhook serves a new one");
  }
}

// Makes every handshake of `wanted` (key -> seconds to wait), a few at a time.
std::map<DialKey, probe::HandshakeOutcome> DialAll(const std::map<DialKey, int>& wanted,
                                                   const Dialer& dial) {
  constexpr std::size_t kParallelDials = 16;
  const std::vector<std::pair<DialKey, int>> jobs(wanted.begin(), wanted.end());
  std::vector<probe::HandshakeOutcome> outcomes(jobs.size());
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t i = next++; i < jobs.size(); i = next++) {
      const auto& [key, seconds] = jobs[i];
      const auto& [host, port, name, pem] = key;
      outcomes[i] = dial(HostPort{host, port}, name, pem, std::chrono::seconds(seconds));
    }
  };
  std::vector<std::thread> workers;
  for (std::size_t i = 0; i < std::min(kParallelDials, jobs.size()); ++i) {
    workers.emplace_back(work);
  }
  for (std::thread& worker : workers) {
    worker.join();
  }
  std::map<DialKey, probe::HandshakeOutcome> met;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    met.emplace(jobs[i].first, std::move(outcomes[i]));
  }
  return met;
}

// Dials every entry's addresses and turns what was met into findings: per
// entry one for the failed handshakes (coded as the first of them) and one for a near end.
void JudgeHandshakes(const AuditOptions& options, TimePoint now, Inventory& inventory) {
  std::map<DialKey, int> wanted;  // -> the longest wait, in seconds
  int skipped_unverified = 0;
  int skipped_without_bundle = 0;
  for (const Pending& pending : inventory.entries) {
    if (pending.dial.empty()) {
      continue;
    }
    if (!pending.verified) {
      ++skipped_unverified;
      continue;
    }
    if (pending.bundle_pem.empty()) {
      // Findings say why when the bundle is missing, unreadable or expired; a URL without one
      // is verified against the API server's own roots, which certctl cannot know.
      skipped_without_bundle += pending.service ? 0 : 1;
      continue;
    }
    for (const HostPort& address : pending.dial) {
      int& wait = wanted[{address.host, address.port, pending.server_name, pending.bundle_pem}];
      wait = std::max(wait, pending.timeout_seconds);
    }
  }
  const std::map<DialKey, probe::HandshakeOutcome> met = DialAll(wanted, options.dial);

  for (Pending& pending : inventory.entries) {
    if (pending.dial.empty() || !pending.verified || pending.bundle_pem.empty()) {
      continue;
    }
    bool near_end_reported = false;
    int failed = 0;
    std::string first_failure;
    FindingCode failure_code = FindingCode::kHandshakeFailed;
    for (const HostPort& address : pending.dial) {
      const probe::HandshakeOutcome& outcome =
          met.at({address.host, address.port, pending.server_name, pending.bundle_pem});
      if (outcome.status) {
        if (!near_end_reported) {
          const std::size_t before = pending.entry.findings.size();
          JudgeServed(pending, address, outcome, now, options.renew_before);
          near_end_reported = pending.entry.findings.size() > before;
        }
        continue;
      }
      if (failed++ == 0) {
        failure_code = outcome.name_not_covered ? FindingCode::kTargetNameNotCovered
                                                : FindingCode::kHandshakeFailed;
        first_failure = OneLine(outcome.status.error().message(), kMaxShown);
      }
    }
    if (failed > 0) {
      std::string message = first_failure;
      if (pending.dial.size() > 1) {
        message += " (" + std::to_string(failed) + " of the " +
                   std::to_string(pending.dial.size()) + " addresses dialled failed)";
      }
      message += ": the API server's calls there fail";
      Add(pending, failure_code, Severity::kCritical, std::move(message));
    }
  }
  if (skipped_unverified > 0) {
    inventory.notes.push_back(std::to_string(skipped_unverified) +
                              " APIService(s) with insecureSkipTLSVerify were not dialled: the "
                              "API server verifies nothing there");
  }
  if (skipped_without_bundle > 0) {
    inventory.notes.push_back(std::to_string(skipped_without_bundle) +
                              " entries calling a URL without a caBundle were not dialled: the "
                              "API server verifies those against its own trusted roots");
  }
}

}  // namespace

std::string_view SeverityName(Severity severity) {
  return severity == Severity::kCritical ? "critical" : "warning";
}

std::optional<Severity> ParseSeverity(std::string_view name) {
  if (name == "critical") {
    return Severity::kCritical;
  }
  if (name == "warning") {
    return Severity::kWarning;
  }
  return std::nullopt;
}

bool AuditReport::Fails(Severity fail_on) const {
  return std::any_of(findings.begin(), findings.end(), [&](const AuditFinding& finding) {
    return fail_on == Severity::kWarning || finding.severity == Severity::kCritical;
  });
}

Result<AuditReport> Audit(kube::Client& client, const AuditOptions& options, TimePoint now) {
  Inventory inventory;
  kube::ListOptions list;
  list.label_selector = options.selector;
  list.page_size = kPageSize;
  for (TargetKind kind :
       {TargetKind::kValidatingWebhookConfiguration, TargetKind::kMutatingWebhookConfiguration,
        TargetKind::kCustomResourceDefinition, TargetKind::kApiService}) {
    const kube::ResourceType& type = controller::ResourceFor(kind);
    auto listed = client.ListPages(type, "", list, [&](kube::Json& items) -> Status {
      for (const kube::Json& item : items) {
        if (CallsOut(kind, item)) {
          Take(kind, item, now, options.renew_before, inventory);
        }
      }
      return {};
    });
    if (!listed) {
      return Fail(listed.error().Wrap("list " + std::string(type.resource)));
    }
  }

  std::set<ServiceKey> called;
  for (const Pending& pending : inventory.entries) {
    if (pending.service) {
      called.insert({pending.service->ns, pending.service->name});
    }
  }
  auto read = ReadReachability(client, called, inventory.notes);
  if (!read) {
    return Fail(read.error());
  }
  JudgeReachability(*read, inventory);
  if (options.handshake) {
    JudgeHandshakes(options, now, inventory);
  }

  AuditReport report;
  for (Pending& pending : inventory.entries) {
    report.findings.insert(report.findings.end(), pending.entry.findings.begin(),
                           pending.entry.findings.end());
    report.entries.push_back(std::move(pending.entry));
  }
  for (AuditFinding& finding : internal::TimeoutsAddUp(inventory.hooks)) {
    report.findings.push_back(std::move(finding));
  }
  report.notes = std::move(inventory.notes);
  report.handshake = options.handshake;
  return report;
}

}  // namespace certctl::audit
