// What a target calls, and whether a certificate's names cover it: ReadCalledEndpoints,
// UrlHost, SansCoverHost and FailClosedPatch over any JSON the API server could send.
// The input is a kind digit ('0' validating, '1' mutating webhooks, '2' CRD, '3' APIService),
// then the object's JSON text, then optionally the separator and SANs, one per line.
// Properties:
//  - nothing throws; an object with caBundle slots has one endpoint per slot;
//  - every endpoint names a host or a problem, never both, and a problem is one line that
//    names the field it is about;
//  - a URL's host is what UrlHost says of the URL; a host is covered by a certificate that
//    names exactly it (an IP host by an IP SAN, anything else by a DNS SAN), the lone "."
//    aside, which Go never matches;
//  - matching ignores the case of the host and of the SANs;
//  - the failurePolicy patch applies to the object whenever every webhook is named, leaves
//    no Ignore behind, changes nothing but failurePolicy, and needs no second patch.

#include "certctl/inject/called_names.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "certctl/inject/patch.h"
#include "certctl/inject/targets.h"
#include "certctl/pki/names.h"

#include "fuzz_support.h"
#include "target_input.h"
#include <arpa/inet.h>

namespace {

using certctl::inject::CalledEndpoint;
using certctl::inject::TargetKind;
using Json = nlohmann::json;

bool IsIp(const std::string& text) {
  unsigned char buffer[16];
  return inet_pton(AF_INET, text.c_str(), buffer) == 1 ||
         inet_pton(AF_INET6, text.c_str(), buffer) == 1;
}

std::string Upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return text;
}

std::vector<std::string> Lines(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    lines.emplace_back(text.substr(0, end));
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  }
  return lines;
}

void CheckFailClosed(TargetKind kind, const Json& object) {
  const auto patch = certctl::inject::FailClosedPatch(kind, object);
  if (!patch) {
    return;
  }
  FUZZ_CHECK(kind == TargetKind::kValidatingWebhookConfiguration ||
             kind == TargetKind::kMutatingWebhookConfiguration);
  Json patched;
  try {
    patched = object.patch(*patch);
  } catch (const Json::exception&) {
    FUZZ_CHECK(false);  // the patch does not apply to the object it was made for
  }
  Json expected = object;
  for (Json& webhook : expected["webhooks"]) {
    if (webhook.is_object() && webhook.contains("name") && webhook["name"].is_string() &&
        webhook.contains("failurePolicy") && webhook["failurePolicy"] == "Ignore") {
      webhook["failurePolicy"] = "Fail";
    }
  }
  FUZZ_CHECK(patched == expected);
  FUZZ_CHECK(!certctl::inject::FailClosedPatch(kind, patched).has_value());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto input = certctl::fuzz::ReadTargetInput(data, size);
  if (!input) {
    return 0;
  }
  const TargetKind kind = input->kind;
  const Json& object = input->object;
  const std::vector<std::string> sans =
      input->rest ? Lines(*input->rest) : std::vector<std::string>{};

  const std::vector<CalledEndpoint> endpoints = certctl::inject::ReadCalledEndpoints(kind, object);
  const auto slots = certctl::inject::ReadBundleSlots(kind, object);
  if (slots) {
    FUZZ_CHECK(endpoints.size() == slots->size());
  }
  for (const CalledEndpoint& endpoint : endpoints) {
    FUZZ_CHECK(endpoint.host.empty() != endpoint.problem.empty());
    if (!endpoint.problem.empty()) {
      FUZZ_CHECK(endpoint.problem.find('\n') == std::string::npos);
      FUZZ_CHECK(endpoint.problem.rfind(endpoint.field, 0) == 0);
      continue;
    }
    if (!endpoint.url.empty()) {
      const auto host = certctl::inject::UrlHost(endpoint.url);
      FUZZ_CHECK(host.has_value() && *host == endpoint.host);
    } else {
      FUZZ_CHECK(endpoint.service.has_value());
      FUZZ_CHECK(endpoint.service->port >= 1 && endpoint.service->port <= 65535);
    }
    const std::string& host = endpoint.host;
    if (host != ".") {
      FUZZ_CHECK(IsIp(host) ? certctl::pki::SansCoverHost({}, {host}, host)
                            : certctl::pki::SansCoverHost({host}, {}, host));
    }
    // Whatever the SANs, the case of either side changes nothing.
    const bool covered = certctl::pki::SansCoverHost(sans, sans, host);
    std::vector<std::string> upper_sans;
    for (const std::string& san : sans) {
      upper_sans.push_back(Upper(san));
    }
    FUZZ_CHECK(certctl::pki::SansCoverHost(upper_sans, sans, Upper(host)) == covered);
  }
  CheckFailClosed(kind, object);
  return 0;
}
