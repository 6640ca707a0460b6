// Kubeconfig files, as LoadClusterConfig reads them (it only reads files, so the input is
// written to a scratch folder first). The input's parts, split by the separator: the first
// file; then, when present, a second file (both are read as KUBECONFIG=first:missing:second,
// merged the way kubectl merges them) and a --context value. The scratch folder also holds
// ca.crt, client.crt, client.key and token, so relative file references resolve.
// Properties:
//  - no crash and no exception, whatever the YAML;
//  - every failure is kInvalidArgument with a message (bad input, never retried);
//  - a loaded configuration is usable: an http(s) server without a trailing slash,
//    certificate and key both or neither, no CA next to insecure-skip-tls-verify, a PEM
//    where a CA is set, a supported exec apiVersion, and no credentials at all for a plain
//    http server (they are only sent over TLS); a namespace always resolves;
//  - loading twice gives the same answer.
// Inputs naming a file outside the scratch folder are skipped: reading /dev/zero or a FIFO
// would test the machine, not the parser.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "certctl/kube/config.h"
#include "certctl/util/environment.h"

#include "fuzz_support.h"
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using certctl::ErrorCode;
using certctl::MapEnvironment;
using certctl::kube::ClusterConfig;
using certctl::kube::ConfigOptions;

constexpr char kPem[] = "-----BEGIN CERTIFICATE-----\nTUlJ\n-----END CERTIFICATE-----\n";
constexpr char kKeyPem[] = "-----BEGIN PRIVATE KEY-----\nTUlJ\n-----END PRIVATE KEY-----\n";

void WriteText(const fs::path& path, std::string_view content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  FUZZ_CHECK(out.good());
}

// The scratch folder, made once per process and removed at exit (never destroyed before then:
// the exit handler still needs it).
const fs::path& Scratch() {
  static const fs::path* const dir = [] {
    std::string pattern = (fs::temp_directory_path() / "certctl-fuzz-kubeconfig-XXXXXX").string();
    FUZZ_CHECK(::mkdtemp(pattern.data()) != nullptr);
    const auto* made = new fs::path(fs::canonical(pattern));
    WriteText(*made / "ca.crt", kPem);
    WriteText(*made / "client.crt", kPem);
    WriteText(*made / "client.key", kKeyPem);
    WriteText(*made / "token", "fuzz-token\n");
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(Scratch(), ignored);
    });
    return made;
  }();
  return *dir;
}

// True when a scalar of the document, taken as a path the way the loader resolves it,
// names something outside the scratch folder.
bool NamesOutsideFile(std::string_view text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception&) {
    return false;  // the loader will refuse it before reading anything else
  }
  const fs::path& scratch = Scratch();
  std::vector<YAML::Node> pending = {root};
  std::size_t visited = 0;
  while (!pending.empty()) {
    const YAML::Node node = pending.back();
    pending.pop_back();
    if (++visited > 20000) {
      return true;  // aliases can make a small document a huge tree; not worth walking
    }
    if (node.IsScalar()) {
      const std::string& value = node.Scalar();
      if (value.empty()) {
        continue;
      }
      const fs::path candidate = fs::path(value).is_absolute() ? fs::path(value) : scratch / value;
      std::error_code error;
      const fs::file_status status = fs::status(candidate, error);
      if (error || !fs::exists(status)) {
        continue;
      }
      const fs::path resolved = fs::weakly_canonical(candidate, error);
      const auto outside =
          std::mismatch(scratch.begin(), scratch.end(), resolved.begin(), resolved.end()).first;
      if (error || outside != scratch.end()) {
        return true;
      }
    } else if (node.IsSequence()) {
      for (const YAML::Node& item : node) {
        pending.push_back(item);
      }
    } else if (node.IsMap()) {
      for (const auto& entry : node) {
        pending.push_back(entry.first);
        pending.push_back(entry.second);
      }
    }
  }
  return false;
}

bool StartsWith(const std::string& text, std::string_view prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

void CheckConfig(const ClusterConfig& config, const MapEnvironment& env) {
  const bool https = StartsWith(config.server, "https://");
  FUZZ_CHECK(https || StartsWith(config.server, "http://"));
  FUZZ_CHECK(config.server.back() != '/');
  FUZZ_CHECK(!config.description.empty());
  FUZZ_CHECK(config.tls.client_cert_pem.empty() == config.tls.client_key_pem.empty());
  FUZZ_CHECK(!config.tls.insecure_skip_verify || config.tls.ca_pem.empty());
  if (!config.tls.ca_pem.empty()) {
    FUZZ_CHECK(config.tls.ca_pem.find("-----BEGIN ") != std::string::npos);
  }
  if (config.exec) {
    FUZZ_CHECK(!config.exec->command.empty());
    FUZZ_CHECK(config.exec->api_version == "client.authentication.k8s.io/v1" ||
               config.exec->api_version == "client.authentication.k8s.io/v1beta1");
  }
  if (!https) {
    FUZZ_CHECK(config.token.empty() && config.token_file.empty());
    FUZZ_CHECK(config.tls.client_cert_pem.empty() && !config.exec);
  }
  FUZZ_CHECK(!certctl::kube::ResolveNamespace("", env, config).empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto parts = certctl::fuzz::SplitParts(certctl::fuzz::AsText(data, size), 3);
  for (const std::string_view part : parts) {
    if (NamesOutsideFile(part)) {
      return 0;
    }
  }
  const fs::path& scratch = Scratch();
  const fs::path first = scratch / "config";
  const fs::path second = scratch / "config2";
  WriteText(first, parts[0]);

  ConfigOptions options;
  MapEnvironment env;
  if (parts.size() == 1) {
    options.kubeconfig = first.string();
  } else {
    WriteText(second, parts[1]);
    env.Set("KUBECONFIG",
            first.string() + ":" + (scratch / "missing").string() + ":" + second.string());
    if (parts.size() > 2) {
      options.context = std::string(parts[2]);
    }
  }

  const auto loaded = certctl::kube::LoadClusterConfig(options, env);
  const auto again = certctl::kube::LoadClusterConfig(options, env);
  FUZZ_CHECK(loaded.has_value() == again.has_value());
  if (!loaded) {
    FUZZ_CHECK(loaded.error().code() == ErrorCode::kInvalidArgument);
    FUZZ_CHECK(!loaded.error().message().empty());
    FUZZ_CHECK(loaded.error().message() == again.error().message());
    return 0;
  }
  FUZZ_CHECK(loaded->server == again->server && loaded->token == again->token &&
             loaded->tls.ca_pem == again->tls.ca_pem);
  CheckConfig(*loaded, env);
  return 0;
}
