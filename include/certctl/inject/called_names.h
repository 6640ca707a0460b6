#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "certctl/inject/targets.h"
#include "certctl/util/host_port.h"

namespace certctl::inject {

// The Service a clientConfig names; the API server dials it and verifies NAME.NAMESPACE.svc.
struct ServiceReference {
  std::string ns;
  std::string name;
  std::int64_t port = 443;  // the Service port the entry names (443 when it names none)
};

// What the API server calls for one caBundle slot of a target: a webhook entry, a CRD's
// conversion webhook or an APIService.
struct CalledEndpoint {
  std::size_t index = 0;  // position in webhooks[]; 0 for a CRD or an APIService
  std::string entry;      // webhooks[].name; empty for a CRD or an APIService
  std::string field;      // "webhooks[1].clientConfig", "spec.conversion.webhook.clientConfig"
  std::optional<ServiceReference> service;
  std::string url;      // clientConfig.url as written, when the entry has one
  std::string host;     // the name the API server verifies: "hook.infra.svc", a URL's host (an
                        // IPv6 literal without its brackets); empty when `problem` is set
  std::string problem;  // why no name can be told ("webhooks[0].clientConfig.url ... is not
                        // https"); empty when the entry is well formed
  // False for an APIService with insecureSkipTLSVerify: the API server checks no name then.
  bool verified = true;

  // What the entry calls, as a user reads it: the URL, else the service's host name.
  std::string Calls() const;
};

// The endpoint of every caBundle slot of `object`, in the order ReadBundleSlots gives the
// slots, so that the two line up. A slot whose clientConfig is malformed (neither or both
// of service and url, a url that is not https or has user information, a query or a
// fragment, a service without name or namespace, a port outside 1-65535) gets an endpoint
// with `problem` naming the field; the rest are still read. Empty when the object has no
// slots at all (ReadBundleSlots says why).
std::vector<CalledEndpoint> ReadCalledEndpoints(TargetKind kind, const nlohmann::json& object);

// The host of an https URL as the API server reads it: lower-case, IPv6 brackets removed,
// port, path ignored. kInvalidArgument with the reason when the URL is one the API server
// refuses to call (not https, no host, user information, query or fragment).
Result<std::string> UrlHost(std::string_view url);

// The same, with the port the API server dials: the one written, else 443.
Result<HostPort> UrlAddress(std::string_view url);

}  // namespace certctl::inject
