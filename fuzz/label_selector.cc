// Label and field selectors on their way to the API server. certctl checks the syntax of a
// --webhook-selector (kube::ValidateLabelSelector) and the REST client carries it, with the
// namespace, into the URL of a List or a Watch. What must hold is that the check is total
// and stable (a valid selector stays valid with spaces around it or one more requirement),
// and that whatever the user typed arrives intact and cannot change the rest of the request.
// The input's parts, split by the separator: label selector, field selector, namespace, the
// List answer's body, the Watch stream. Properties, for every request the client makes:
//  - the URL is the server, the expected path and a query of name=value pairs, every byte
//    outside [A-Za-z0-9-._~] percent-encoded;
//  - labelSelector and fieldSelector decode to exactly the selectors (and are absent when
//    empty), the namespace segment to exactly the namespace; no parameter appears twice;
//  - whatever the server answers, List and Watch return a result or an error, never crash.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "certctl/kube/client.h"
#include "certctl/kube/selector.h"
#include "certctl/kube/transport.h"
#include "certctl/util/clock.h"

#include "fuzz_support.h"

namespace {

namespace kube = certctl::kube;
using certctl::Clock;
using certctl::MonotonicTime;
using certctl::Result;
using certctl::TimePoint;
using kube::HttpRequest;
using kube::HttpResponse;

constexpr char kServer[] = "https://api.fuzz:6443";

// Time never passes and no retry waits.
class StillClock final : public Clock {
 public:
  TimePoint Now() const override { return TimePoint(std::chrono::hours(500000)); }
  MonotonicTime Monotonic() const override { return MonotonicTime(); }
  void Sleep(std::chrono::milliseconds /*duration*/) const override {}
};

// The API server's end: records every URL, answers List with `list_body` and streams
// `watch_body` to a Watch.
class RecordingTransport final : public kube::HttpTransport {
 public:
  RecordingTransport(std::vector<std::string>& urls, std::string list_body, std::string watch_body)
      : urls_(urls), list_body_(std::move(list_body)), watch_body_(std::move(watch_body)) {}

  Result<HttpResponse> Send(const HttpRequest& request) override {
    urls_.push_back(request.url);
    return HttpResponse{200, {{"content-type", "application/json"}}, list_body_};
  }

  Result<HttpResponse> Stream(const HttpRequest& request, const kube::BodyChunkHandler& on_chunk,
                              const std::function<bool()>& /*cancelled*/) override {
    urls_.push_back(request.url);
    if (!watch_body_.empty()) {
      on_chunk(watch_body_);
    }
    return HttpResponse{200, {{"content-type", "application/json"}}, ""};
  }

 private:
  std::vector<std::string>& urls_;
  const std::string list_body_;
  const std::string watch_body_;
};

bool IsUnreserved(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;  // the client writes upper-case hex only
}

// Strict percent-decoding of what the client wrote; nullopt for anything it should not write.
std::optional<std::string> Decode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (IsUnreserved(text[i])) {
      out += text[i];
      continue;
    }
    if (text[i] != '%' || i + 2 >= text.size() || HexValue(text[i + 1]) < 0 ||
        HexValue(text[i + 2]) < 0) {
      return std::nullopt;
    }
    out += static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2]));
    i += 2;
  }
  return out;
}

void CheckUrl(const std::string& url, std::string_view ns, std::string_view label,
              std::string_view field) {
  const std::string prefix = std::string(kServer) + "/api/v1/";
  FUZZ_CHECK(url.compare(0, prefix.size(), prefix) == 0);
  const std::size_t question = url.find('?');
  const std::string_view path = std::string_view(url).substr(
      prefix.size(), question == std::string::npos ? question : question - prefix.size());
  if (ns.empty()) {
    FUZZ_CHECK(path == "secrets");
  } else {
    constexpr std::string_view kNamespaces = "namespaces/";
    constexpr std::string_view kSecrets = "/secrets";
    FUZZ_CHECK(path.size() > kNamespaces.size() + kSecrets.size());
    FUZZ_CHECK(path.substr(0, kNamespaces.size()) == kNamespaces);
    FUZZ_CHECK(path.substr(path.size() - kSecrets.size()) == kSecrets);
    const auto segment =
        Decode(path.substr(kNamespaces.size(), path.size() - kNamespaces.size() - kSecrets.size()));
    FUZZ_CHECK(segment && *segment == ns);
  }

  std::map<std::string, std::string> query;
  if (question != std::string::npos) {
    std::string_view rest = std::string_view(url).substr(question + 1);
    while (true) {
      const std::size_t amp = rest.find('&');
      const std::string_view pair = rest.substr(0, amp);
      const std::size_t equals = pair.find('=');
      FUZZ_CHECK(equals != std::string_view::npos);
      const auto name = Decode(pair.substr(0, equals));
      const auto value = Decode(pair.substr(equals + 1));
      FUZZ_CHECK(name && value && !name->empty());
      FUZZ_CHECK(query.emplace(*name, *value).second);
      if (amp == std::string_view::npos) {
        break;
      }
      rest.remove_prefix(amp + 1);
    }
  }
  const auto selector = [&](const char* name) -> std::optional<std::string> {
    auto it = query.find(name);
    return it == query.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  FUZZ_CHECK(label.empty() ? !selector("labelSelector") : selector("labelSelector") == label);
  FUZZ_CHECK(field.empty() ? !selector("fieldSelector") : selector("fieldSelector") == field);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto parts = certctl::fuzz::SplitParts(certctl::fuzz::AsText(data, size), 5);
  const auto part = [&](std::size_t i) { return i < parts.size() ? parts[i] : std::string_view(); };
  const std::string label(part(0));
  const std::string field(part(1));
  const std::string ns(part(2));
  const std::string list_body = parts.size() > 3 ? std::string(part(3)) : R"({"items":[]})";
  const std::string watch_body(part(4));

  if (kube::ValidateLabelSelector(label)) {
    FUZZ_CHECK(kube::ValidateLabelSelector(" " + label + " "));
    // Only a selector with a requirement can take another after a comma.
    if (!kube::SelectsEverything(label)) {
      FUZZ_CHECK(kube::ValidateLabelSelector(label + ",certctl.io/extra"));
    }
  }

  std::vector<std::string> urls;
  kube::ClusterConfig config;
  config.server = kServer;
  kube::ClientOptions options;
  options.qps = 0;
  options.retry.max_retries = 0;
  const StillClock clock;
  auto client = kube::MakeRestClient(
      config, std::make_unique<RecordingTransport>(urls, list_body, watch_body), options, clock);
  FUZZ_CHECK(client.has_value());

  kube::ListOptions list;
  list.label_selector = label;
  list.field_selector = field;
  static_cast<void>((*client)->List(kube::kSecrets, ns, list));

  kube::WatchOptions watch;
  watch.label_selector = label;
  watch.field_selector = field;
  std::size_t events = 0;
  static_cast<void>((*client)->Watch(
      kube::kSecrets, ns, watch,
      [&events](const kube::WatchEvent& event) {
        FUZZ_CHECK(event.object.is_object());
        return ++events < 1000;
      },
      [] { return false; }));

  FUZZ_CHECK(urls.size() >= 2);
  for (const std::string& url : urls) {
    CheckUrl(url, ns, label, field);
  }
  return 0;
}
