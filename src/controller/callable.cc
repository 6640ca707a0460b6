#include "certctl/controller/callable.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "certctl/inject/patch.h"
#include "certctl/kube/object.h"
#include "certctl/pki/names.h"
#include "certctl/util/safety_controls.h"
#include "certctl/util/text.h"

namespace certctl::controller {
namespace {

// A message lists this many of the leaf's names before it says how many more there are.
constexpr std::size_t kNamesShown = 6;
// A Service finding lists this many calling entries before it says how many more.
constexpr std::size_t kCallersShown = 3;
// Names from the cluster are shown on one line and cut at this length.
constexpr std::size_t kMaxShown = 256;

std::string Shown(std::string_view text) { return OneLine(text, kMaxShown); }

std::string LeafNames(const pki::CertificateInfo& leaf) {
  std::vector<std::string> names = leaf.dns_names;
  names.insert(names.end(), leaf.ip_addresses.begin(), leaf.ip_addresses.end());
  if (names.empty()) {
    return "it names no DNS name or IP address";
  }
  std::string text = "it names ";
  for (std::size_t i = 0; i < names.size() && i < kNamesShown; ++i) {
    text += (i == 0 ? "" : ", ") + Shown(names[i]);
  }
  if (names.size() > kNamesShown) {
    text += " and " + std::to_string(names.size() - kNamesShown) + " more";
  }
  return text;
}

// An entry as findings name it, with the object it belongs to.
std::string Caller(const TargetStatus& status) {
  std::string kind = status.kind;
  std::transform(kind.begin(), kind.end(), kind.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return kind + "/" + status.name + " " + EntryLabel(status.endpoint);
}

std::string Callers(const std::vector<TargetStatus*>& callers) {
  std::string text;
  for (std::size_t i = 0; i < callers.size() && i < kCallersShown; ++i) {
    text += (i == 0 ? "" : ", ") + Caller(*callers[i]);
  }
  if (callers.size() > kCallersShown) {
    text += " and " + std::to_string(callers.size() - kCallersShown) + " more";
  }
  return text;
}

// A finding lists this many of a Service's ports before it says how many more there are.
constexpr std::size_t kPortsShown = 10;

std::string PortList(const std::map<std::int64_t, std::string>& exposed) {
  std::string text;
  std::size_t shown = 0;
  for (const auto& [number, port_name] : exposed) {
    if (shown == kPortsShown) {
      return text + " and " + std::to_string(exposed.size() - kPortsShown) + " more";
    }
    text += (shown++ == 0 ? "" : ", ") + std::to_string(number);
  }
  return text;
}

struct EndpointCount {
  int ready = 0;
  int malformed = 0;  // conditions.ready present but not a boolean: counted as not ready
  std::vector<HostPort> addresses;  // of the ready ones, when the slice names the port
};

// An EndpointSlice endpoint is ready unless its conditions say otherwise (absent means ready,
// as the EndpointSlice API defines it); a `ready` that is not a boolean is no promise either.
Result<EndpointCount> ReadyEndpoints(const kube::Json& slice, const std::string& port_name,
                                     std::string_view what) {
  auto ports = kube::OptionalArray(slice, "/ports", what);
  if (!ports) {
    return Fail(ports.error());
  }
  // A slice without ports serves every port of the Service; with ports, the Service port is
  // matched by name ("" for a Service with one unnamed port).
  std::optional<std::int64_t> served_on;
  if (*ports != nullptr && !(*ports)->empty()) {
    bool serves = false;
    for (const kube::Json& port : **ports) {
      auto name = kube::OptionalString(port, "/name", what);
      auto number = kube::OptionalInteger(port, "/port", what);
      if (!name || !number) {
        return Fail(!name ? name.error() : number.error());
      }
      if (name->value_or("") == port_name) {
        serves = true;
        served_on = *number;
      }
    }
    if (!serves) {
      return EndpointCount{};
    }
  }
  auto endpoints = kube::OptionalArray(slice, "/endpoints", what);
  if (!endpoints) {
    return Fail(endpoints.error());
  }
  EndpointCount count;
  if (*endpoints == nullptr) {
    return count;
  }
  for (const kube::Json& endpoint : **endpoints) {
    const kube::Json* conditions = nullptr;
    if (endpoint.is_object()) {
      auto it = endpoint.find("conditions");
      conditions = it != endpoint.end() && it->is_object() ? &*it : nullptr;
    }
    const kube::Json* ready = nullptr;
    if (conditions != nullptr) {
      auto it = conditions->find("ready");
      ready = it != conditions->end() && !it->is_null() ? &*it : nullptr;
    }
    if (ready != nullptr && !ready->is_boolean()) {
      count.malformed += 1;
      continue;
    }
    if (ready != nullptr && !ready->get<bool>()) {
      continue;
    }
    count.ready += 1;
    const auto addresses = endpoint.find("addresses");
    if (served_on && *served_on > 0 && *served_on <= 65535 && addresses != endpoint.end() &&
        addresses->is_array() && !addresses->empty() && addresses->front().is_string()) {
      count.addresses.push_back(
          {addresses->front().get<std::string>(), static_cast<int>(*served_on)});
    }
  }
  return count;
}

}  // namespace

std::string EntryLabel(const inject::CalledEndpoint& endpoint) {
  if (endpoint.field.rfind("webhooks[", 0) == 0) {
    std::string label = "webhooks[" + std::to_string(endpoint.index) + "]";
    return endpoint.entry.empty() ? label : label + " (" + Shown(endpoint.entry) + ")";
  }
  if (endpoint.field == "spec") {
    return "spec.service";
  }
  return "spec.conversion.webhook";
}

std::vector<CallVerdict> JudgeCalls(const TargetObject& target, const pki::CertificateInfo* leaf) {
  const std::string object = TargetObjectName(target.kind, target.name);
  std::vector<CallVerdict> verdicts;
  for (inject::CalledEndpoint& endpoint : inject::ReadCalledEndpoints(target.kind, target.object)) {
    CallVerdict verdict;
    if (!endpoint.problem.empty()) {
      verdict.finding = Finding{FindingCode::kTargetInvalid, object, Shown(endpoint.problem)};
    } else if (leaf != nullptr && endpoint.verified && !SafetyRemoved("names") &&
               !pki::SansCoverHost(leaf->dns_names, leaf->ip_addresses, endpoint.host)) {
      std::string message = EntryLabel(endpoint) + " calls ";
      if (endpoint.url.empty()) {
        message += Shown(endpoint.host) + ", which the certificate does not name";
      } else {
        message += Shown(endpoint.url) + ", whose host " + Shown(endpoint.host) +
                   " the certificate does not name";
      }
      verdict.finding = Finding{FindingCode::kTargetNameNotCovered, object,
                                message + " (" + LeafNames(*leaf) + ")"};
    }
    verdict.endpoint = std::move(endpoint);
    verdicts.push_back(std::move(verdict));
  }
  return verdicts;
}

std::vector<Finding> CallFindings(const std::vector<TargetObject>& targets,
                                  const pki::CertificateInfo& leaf) {
  std::vector<Finding> findings;
  for (const TargetObject& target : targets) {
    for (CallVerdict& verdict : JudgeCalls(target, &leaf)) {
      if (verdict.finding) {
        findings.push_back(std::move(*verdict.finding));
      }
    }
  }
  return findings;
}

Result<ServiceReach> JudgeServiceReach(const kube::Json* service, const kube::Json* slices,
                                       std::int64_t port, const std::string& object) {
  ServiceReach reach;
  if (service == nullptr) {
    reach.problem = FindingCode::kServiceMissing;
    reach.detail = "does not exist";
    return reach;
  }
  auto type = kube::OptionalString(*service, "/spec/type", object);
  if (!type) {
    return Fail(type.error());
  }
  // An ExternalName Service is a DNS alias: it has no ports or endpoints of its own.
  if (type->value_or("") == "ExternalName") {
    return reach;
  }
  auto service_ports = kube::OptionalArray(*service, "/spec/ports", object);
  if (!service_ports) {
    return Fail(service_ports.error());
  }
  // port -> its name, for the EndpointSlices.
  std::map<std::int64_t, std::string> exposed;
  if (*service_ports != nullptr) {
    for (const kube::Json& service_port : **service_ports) {
      auto number = kube::OptionalInteger(service_port, "/port", object);
      auto port_name = kube::OptionalString(service_port, "/name", object);
      if (!number || !port_name) {
        return Fail(!number ? number.error() : port_name.error());
      }
      if (*number) {
        exposed[**number] = port_name->value_or("");
      }
    }
  }
  if (exposed.count(port) == 0) {
    reach.problem = FindingCode::kServicePortMissing;
    reach.detail = "has no port " + std::to_string(port) + " (" +
                   (exposed.empty() ? std::string("it has none") : "it has " + PortList(exposed)) +
                   ")";
    return reach;
  }
  if (slices == nullptr) {
    reach.needs_slices = true;
    return reach;
  }
  int ready = 0;
  for (const kube::Json& slice : *slices) {
    auto count = ReadyEndpoints(slice, exposed[port], "endpointslice of " + object);
    if (!count) {
      return Fail(count.error());
    }
    ready += count->ready;
    reach.malformed += count->malformed;
    for (HostPort& address : count->addresses) {
      if (reach.ready_addresses.size() < kReadyAddressesKept) {
        reach.ready_addresses.push_back(std::move(address));
      }
    }
  }
  if (ready == 0) {
    reach.problem = FindingCode::kNoReadyEndpoints;
    reach.detail =
        "has no ready endpoint for port " + std::to_string(port) + " (no EndpointSlice lists one)";
  }
  return reach;
}

Status CheckServices(kube::Client& client, CheckReport& report) {
  // Every status calling one Service, by Service; then by port within it.
  std::map<std::pair<std::string, std::string>, std::map<std::int64_t, std::vector<TargetStatus*>>>
      services;
  for (TargetStatus& status : report.targets) {
    if (status.endpoint.service) {
      const inject::ServiceReference& service = *status.endpoint.service;
      services[{service.ns, service.name}][service.port].push_back(&status);
    }
  }
  const auto refused = [&](const std::string& what, const Error& error) {
    report.notes.push_back("could not read " + what + " (" + error.message() +
                           "), so whether the API server can reach it was not checked");
  };
  const auto fail_callers = [](const std::vector<TargetStatus*>& callers) {
    for (TargetStatus* caller : callers) {
      caller->ok = false;
    }
  };
  const auto plural = [](const std::vector<TargetStatus*>& callers) {
    return callers.size() == 1 ? "s" : "";
  };
  for (auto& [key, ports] : services) {
    const auto& [ns, name] = key;
    const std::string object = "service/" + ns + "/" + name;
    std::vector<TargetStatus*> all_callers;
    for (auto& [port, callers] : ports) {
      all_callers.insert(all_callers.end(), callers.begin(), callers.end());
    }
    auto service = client.Get(kube::kServices, ns, name);
    if (!service) {
      if (service.error().code() == ErrorCode::kPermissionDenied) {
        refused(object, service.error());
        for (TargetStatus* caller : all_callers) {
          caller->service_unread = true;
        }
        continue;
      }
      return Fail(service.error().Wrap("get " + object));
    }
    if (!service->has_value()) {
      report.call_findings.push_back(
          {FindingCode::kServiceMissing, object,
           "does not exist; " + Callers(all_callers) + " call" + plural(all_callers) + " it"});
      fail_callers(all_callers);
      continue;
    }
    // The EndpointSlices are listed once, and only when a port called is there.
    std::optional<kube::Json> slices;
    bool slices_unread = false;
    for (auto& [port, callers] : ports) {
      auto reach = JudgeServiceReach(&**service, nullptr, port, object);
      if (!reach) {
        return Fail(reach.error());
      }
      if (reach->needs_slices && !slices && !slices_unread) {
        kube::ListOptions options;
        options.label_selector = "kubernetes.io/service-name=" + name;
        auto listed = client.List(kube::kEndpointSlices, ns, options);
        if (!listed) {
          // Refused, or an API server that serves no EndpointSlices (404): not known, not
          // failed.
          if (listed.error().code() != ErrorCode::kPermissionDenied &&
              listed.error().code() != ErrorCode::kNotFound) {
            return Fail(listed.error().Wrap("list endpointslices of " + object));
          }
          refused("the EndpointSlices of " + object, listed.error());
          slices_unread = true;
        } else {
          auto items = kube::OptionalArray(*listed, "/items", "endpointslices of " + object);
          if (!items) {
            return Fail(items.error());
          }
          slices = *items != nullptr ? **items : kube::Json::array();
        }
      }
      if (reach->needs_slices && slices) {
        reach = JudgeServiceReach(&**service, &*slices, port, object);
        if (!reach) {
          return Fail(reach.error());
        }
      }
      if (reach->malformed > 0) {
        report.notes.push_back(std::to_string(reach->malformed) +
                               (reach->malformed == 1 ? " endpoint of " : " endpoints of ") +
                               object + (reach->malformed == 1 ? " has" : " have") +
                               " a conditions.ready that is not true or false; counted as "
                               "not ready");
      }
      if (!reach->problem) {
        continue;
      }
      std::string message = reach->detail;
      if (*reach->problem == FindingCode::kServicePortMissing) {
        message +=
            "; " + Callers(callers) + " call" + plural(callers) + " port " + std::to_string(port);
      } else {
        message += ", so the API server's calls from " + Callers(callers) + " cannot connect";
      }
      report.call_findings.push_back({*reach->problem, object, message});
      fail_callers(callers);
    }
  }
  return {};
}

Result<ClosableEntries> JudgeClosable(kube::Client& client,
                                      const std::vector<TargetObject>& targets,
                                      const pki::CertificateInfo* leaf) {
  CheckReport report;
  std::vector<std::string> objects;  // of report.targets, in step
  for (const TargetObject& target : targets) {
    const std::optional<nlohmann::json> open = inject::FailClosedPatch(target.kind, target.object);
    if (!open) {
      continue;  // no entry with Ignore, or no failurePolicy at all
    }
    const std::string kind(inject::TargetKindName(target.kind));
    for (CallVerdict& verdict : JudgeCalls(target, leaf)) {
      const bool ignoring =
          inject::FailClosedPatch(target.kind, target.object, [&](const std::string& entry) {
            return entry == verdict.endpoint.entry;
          }).has_value();
      if (!ignoring) {
        continue;
      }
      TargetStatus status{kind, target.name, verdict.endpoint.entry, !verdict.finding, "", "",
                          {},   false};
      if (verdict.finding) {
        report.call_findings.push_back(std::move(*verdict.finding));
      }
      status.endpoint = std::move(verdict.endpoint);
      report.targets.push_back(std::move(status));
      objects.push_back(TargetObjectName(target.kind, target.name));
    }
  }
  ClosableEntries closable;
  if (report.targets.empty()) {
    return closable;
  }
  if (auto checked = CheckServices(client, report); !checked) {
    return Fail(checked.error());
  }
  for (std::size_t i = 0; i < report.targets.size(); ++i) {
    const TargetStatus& status = report.targets[i];
    if (status.ok && !status.service_unread && status.endpoint.problem.empty()) {
      closable.entries.insert({objects[i], status.webhook});
    } else {
      ++closable.kept;
    }
  }
  closable.findings = std::move(report.call_findings);
  closable.notes = std::move(report.notes);
  return closable;
}

Result<ClosableEntries> JudgeClosableUntil(kube::Client& client,
                                           const std::vector<TargetObject>& targets,
                                           const pki::CertificateInfo* leaf, TimePoint deadline,
                                           const Clock& clock) {
  // Pods usually become ready within seconds of the hook; one that takes longer is looked
  // for less often, so a long wait costs a few reads, not two a second.
  std::chrono::milliseconds interval{500};
  for (;;) {
    auto judged = JudgeClosable(client, targets, leaf);
    const auto starting = [](const ClosableEntries& closable) {
      return closable.kept > 0 && closable.notes.empty() && !closable.findings.empty() &&
             std::all_of(closable.findings.begin(), closable.findings.end(),
                         [](const Finding& finding) {
                           return finding.code == FindingCode::kNoReadyEndpoints;
                         });
    };
    if (!judged || !starting(*judged) || clock.Now() >= deadline) {
      return judged;
    }
    clock.Sleep(std::min<std::chrono::milliseconds>(
        interval, std::chrono::ceil<std::chrono::milliseconds>(deadline - clock.Now())));
    interval = std::min(interval * 2, std::chrono::milliseconds(8000));
  }
}

}  // namespace certctl::controller
