#include "certctl/inject/called_names.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "inject/json_member.h"

namespace certctl::inject {
namespace {

using Json = nlohmann::json;

using internal::Member;

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string Quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    // The URL came from the cluster: keep control characters out of the one-line message.
    out += std::iscntrl(static_cast<unsigned char>(c)) != 0 ? '?' : c;
  }
  return out + "\"";
}

// The URL as shown in messages: user information (a password, perhaps) is never repeated.
std::string Redacted(std::string_view url) {
  const std::size_t scheme_end = url.find("://");
  const std::size_t start = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  const std::size_t authority_end = url.find_first_of("/?#", start);
  const std::size_t at = url.substr(0, authority_end).rfind('@');
  if (at == std::string_view::npos || at < start) {
    return std::string(url);
  }
  return std::string(url.substr(0, start)) + "REDACTED" + std::string(url.substr(at));
}

// A service reference as the API server validates it; `problem` when it would refuse it.
void ReadService(const Json& service, const std::string& field, CalledEndpoint& endpoint) {
  const std::string where = field + ".service";
  if (!service.is_object()) {
    endpoint.problem = where + " is not an object";
    return;
  }
  const Json* name = Member(service, "name");
  const Json* ns = Member(service, "namespace");
  const Json* port = Member(service, "port");
  if (name == nullptr || !name->is_string() || name->get<std::string>().empty()) {
    endpoint.problem = where + ".name is missing: the API server cannot call the service";
    return;
  }
  if (ns == nullptr || !ns->is_string() || ns->get<std::string>().empty()) {
    endpoint.problem = where + ".namespace is missing: the API server cannot call the service";
    return;
  }
  ServiceReference reference{ns->get<std::string>(), name->get<std::string>(), 443};
  if (port != nullptr) {
    if (!port->is_number_integer()) {
      endpoint.problem = where + ".port is not an integer";
      return;
    }
    // Read as a double first: a huge unsigned number must not wrap into range.
    const double value = port->get<double>();
    if (value < 1 || value > 65535) {
      endpoint.problem = where + ".port " + port->dump() + " is not a port (1-65535)";
      return;
    }
    reference.port = port->get<std::int64_t>();
  }
  endpoint.host = reference.name + "." + reference.ns + ".svc";
  endpoint.service = std::move(reference);
}

void ReadClientConfig(const Json* client_config, const std::string& field,
                      CalledEndpoint& endpoint) {
  endpoint.field = field;
  if (client_config == nullptr || !client_config->is_object()) {
    endpoint.problem = field + " is missing";
    return;
  }
  const Json* url = Member(*client_config, "url");
  const Json* service = Member(*client_config, "service");
  if (url != nullptr && service != nullptr) {
    endpoint.problem = field + " has both url and service; the API server takes exactly one";
    return;
  }
  if (url == nullptr && service == nullptr) {
    endpoint.problem = field + " has neither url nor service, so nothing can be called";
    return;
  }
  if (service != nullptr) {
    ReadService(*service, field, endpoint);
    return;
  }
  if (!url->is_string()) {
    endpoint.problem = field + ".url is not a string";
    return;
  }
  endpoint.url = url->get<std::string>();
  auto host = UrlHost(endpoint.url);
  if (!host) {
    endpoint.problem =
        field + ".url " + Quoted(Redacted(endpoint.url)) + " " + host.error().message();
    return;
  }
  endpoint.host = std::move(*host);
}

std::vector<CalledEndpoint> WebhookEndpoints(const Json& object) {
  std::vector<CalledEndpoint> endpoints;
  const Json* webhooks = Member(object, "webhooks");
  if (webhooks == nullptr || !webhooks->is_array()) {
    return endpoints;
  }
  for (std::size_t i = 0; i < webhooks->size(); ++i) {
    const Json& webhook = (*webhooks)[i];
    CalledEndpoint endpoint;
    endpoint.index = i;
    const Json* name = Member(webhook, "name");
    endpoint.entry = name != nullptr && name->is_string() ? name->get<std::string>() : "";
    ReadClientConfig(Member(webhook, "clientConfig"),
                     "webhooks[" + std::to_string(i) + "].clientConfig", endpoint);
    endpoints.push_back(std::move(endpoint));
  }
  return endpoints;
}

std::vector<CalledEndpoint> ApiServiceEndpoints(const Json& object) {
  const Json* spec = Member(object, "spec");
  if (spec == nullptr || !spec->is_object()) {
    return {};
  }
  CalledEndpoint endpoint;
  endpoint.field = "spec";
  const Json* skip = Member(*spec, "insecureSkipTLSVerify");
  endpoint.verified = !(skip != nullptr && skip->is_boolean() && skip->get<bool>());
  const Json* service = Member(*spec, "service");
  if (service == nullptr) {
    // A local APIService is served by the API server itself: there is no call to verify.
    endpoint.problem = "spec.service is missing: a local APIService has no caBundle to inject";
  } else {
    ReadService(*service, "spec", endpoint);
  }
  return {std::move(endpoint)};
}

}  // namespace

std::string CalledEndpoint::Calls() const {
  if (!url.empty()) {
    return url;
  }
  return host;
}

Result<HostPort> UrlAddress(std::string_view url) {
  const std::size_t scheme_end = url.find("://");
  // Go's URL parser lower-cases the scheme before the API server compares it.
  if (scheme_end == std::string_view::npos || Lower(url.substr(0, scheme_end)) != "https") {
    return Fail(ErrorCode::kInvalidArgument, "is not https, the only scheme the API server calls");
  }
  // Go's URL parser takes a bare "#" or "?" as no fragment and no query; the API server
  // refuses only non-empty ones.
  if (const std::size_t hash = url.find('#');
      hash != std::string_view::npos && hash + 1 < url.size()) {
    return Fail(ErrorCode::kInvalidArgument, "has a fragment, which the API server refuses");
  }
  const std::string_view before_fragment = url.substr(0, url.find('#'));
  if (const std::size_t question = before_fragment.find('?');
      question != std::string_view::npos && question + 1 < before_fragment.size()) {
    return Fail(ErrorCode::kInvalidArgument, "has query parameters, which the API server refuses");
  }
  std::string_view rest = url.substr(scheme_end + 3);
  const std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  if (authority.find('@') != std::string_view::npos) {
    return Fail(ErrorCode::kInvalidArgument, "has user information, which the API server refuses");
  }
  std::string_view host;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return Fail(ErrorCode::kInvalidArgument, "has an IPv6 address without its closing ']'");
    }
    host = authority.substr(1, close - 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty() && after.front() != ':') {
      return Fail(ErrorCode::kInvalidArgument, "has text after the IPv6 address's ']'");
    }
  } else {
    host = authority.substr(0, authority.find(':'));
  }
  HostPort address{Lower(host), 443};
  const std::size_t colon = authority.rfind(':');
  const std::size_t bracket = authority.rfind(']');
  if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
    const std::string_view port = authority.substr(colon + 1);
    if (!port.empty() && !std::all_of(port.begin(), port.end(),
                                      [](unsigned char c) { return std::isdigit(c) != 0; })) {
      return Fail(ErrorCode::kInvalidArgument, "has a port that is not a number");
    }
    if (!port.empty()) {
      // The API server stores any number here, and then cannot dial one beyond 65535.
      if (port.size() > 5 || std::stoi(std::string(port)) > 65535) {
        return Fail(
            ErrorCode::kInvalidArgument,
            "has port " + std::string(port) + ", beyond 65535: nothing can be dialled there");
      }
      address.port = std::stoi(std::string(port));
    }
  }
  if (host.empty()) {
    return Fail(ErrorCode::kInvalidArgument, "has no host");
  }
  return address;
}

Result<std::string> UrlHost(std::string_view url) {
  auto address = UrlAddress(url);
  if (!address) {
    return Fail(address.error());
  }
  return std::move(address->host);
}

std::vector<CalledEndpoint> ReadCalledEndpoints(TargetKind kind, const Json& object) {
  switch (kind) {
    case TargetKind::kValidatingWebhookConfiguration:
    case TargetKind::kMutatingWebhookConfiguration:
      return WebhookEndpoints(object);
    case TargetKind::kCustomResourceDefinition: {
      const Json* spec = Member(object, "spec");
      const Json* conversion = spec != nullptr ? Member(*spec, "conversion") : nullptr;
      const Json* webhook = conversion != nullptr ? Member(*conversion, "webhook") : nullptr;
      if (webhook == nullptr) {
        return {};
      }
      CalledEndpoint endpoint;
      ReadClientConfig(Member(*webhook, "clientConfig"), "spec.conversion.webhook.clientConfig",
                       endpoint);
      return {std::move(endpoint)};
    }
    case TargetKind::kApiService:
      return ApiServiceEndpoints(object);
  }
  return {};
}

}  // namespace certctl::inject
