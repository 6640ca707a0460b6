// Test tool for the end-to-end suite: drives the real kube client (config loading, curl
// transport, REST client, ListWatch) against a server and prints what it sees, one line per
// step, so tests can check reconnects and re-lists through a live connection.
//
//   kube_probe --kubeconfig FILE -n NS --expect a,b,c [--timeout 30]
//
// Watches Secrets in NS and exits 0 once every expected name exists, 1 on timeout, 2 on a
// fatal error. Lines: "LIST <rv> <names>", "<TYPE> <name> <rv>", "RESUME <rv>",
// "RELIST", "RETRY <reason>".
#include <chrono>
#include <iostream>
#include <set>
#include <sstream>
#include <string>

#include "certctl/kube/client.h"
#include "certctl/kube/config.h"
#include "certctl/kube/list_watch.h"
#include "certctl/util/environment.h"

using namespace certctl;

namespace {

std::set<std::string> Split(const std::string& text) {
  std::set<std::string> out;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (!item.empty()) out.insert(item);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  kube::ConfigOptions config_options;
  std::string ns = "default";
  std::set<std::string> expected;
  int timeout_seconds = 30;
  int page_size = 0;  // > 0: the list is taken a page at a time (on_list_page)
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--kubeconfig") {
      config_options.kubeconfig = value;
    } else if (flag == "-n") {
      ns = value;
    } else if (flag == "--expect") {
      expected = Split(value);
    } else if (flag == "--timeout") {
      timeout_seconds = std::stoi(value);
    } else if (flag == "--page-size") {
      page_size = std::stoi(value);
    } else {
      std::cerr << "kube_probe: unknown flag " << flag << "\n";
      return 2;
    }
  }

  const SystemEnvironment env;
  const SystemClock clock;
  auto config = kube::LoadClusterConfig(config_options, env);
  if (!config) {
    std::cerr << "kube_probe: " << config.error().message() << "\n";
    return 2;
  }
  auto transport = kube::MakeCurlTransport(config->tls);
  if (!transport) {
    std::cerr << "kube_probe: " << transport.error().message() << "\n";
    return 2;
  }
  auto client = kube::MakeRestClient(*config, std::move(*transport), {}, clock);
  if (!client) {
    std::cerr << "kube_probe: " << client.error().message() << "\n";
    return 2;
  }

  std::set<std::string> present;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  auto done = [&] {
    for (const std::string& name : expected) {
      if (present.count(name) == 0) return false;
    }
    return true;
  };
  auto name_of = [](const kube::Json& object) {
    return object.value("/metadata/name"_json_pointer, std::string());
  };

  kube::ListWatchHandlers handlers;
  handlers.on_list = [&](const std::vector<kube::Json>& items, const std::string& version) {
    present.clear();
    std::string names;
    for (const kube::Json& item : items) {
      present.insert(name_of(item));
      names += (names.empty() ? "" : ",") + name_of(item);
    }
    std::cout << "LIST " << version << " " << names << std::endl;
  };
  std::string paged_names;  // of the list being taken a page at a time
  if (page_size > 0) {
    handlers.on_list = nullptr;
    handlers.on_list_page = [&](kube::Json& page) {
      std::string names;
      for (const kube::Json& item : page) {
        names += (names.empty() ? "" : ",") + name_of(item);
      }
      if (paged_names.empty()) {
        present.clear();
      }
      for (const kube::Json& item : page) {
        present.insert(name_of(item));
      }
      paged_names += (paged_names.empty() || names.empty() ? "" : ",") + names;
      std::cout << "PAGE " << page.size() << " " << names << std::endl;
    };
    handlers.on_listed = [&](const std::string& version) {
      std::cout << "LIST " << version << " " << paged_names << std::endl;
      paged_names.clear();
    };
  }
  handlers.on_event = [&](const kube::WatchEvent& event) {
    const std::string name = name_of(event.object);
    const char* type = event.type == kube::WatchEventType::kAdded      ? "ADDED"
                       : event.type == kube::WatchEventType::kModified ? "MODIFIED"
                                                                       : "DELETED";
    if (event.type == kube::WatchEventType::kDeleted) {
      present.erase(name);
    } else {
      present.insert(name);
    }
    std::cout << type << " " << name << " "
              << event.object.value("/metadata/resourceVersion"_json_pointer, std::string())
              << std::endl;
  };
  handlers.on_resume = [](const std::string& version) {
    std::cout << (version.empty() ? std::string("RELIST") : "RESUME " + version) << std::endl;
  };
  handlers.on_retry = [](const Error& error, std::chrono::milliseconds) {
    std::cout << "RETRY " << ErrorCodeName(error.code()) << std::endl;
  };
  kube::ListWatchOptions options;
  options.initial_backoff = std::chrono::milliseconds(100);
  if (page_size > 0) {
    options.list.page_size = page_size;
  }
  const Status status = kube::ListWatch(
      **client, kube::kSecrets, ns, options, handlers,
      [&] { return done() || std::chrono::steady_clock::now() >= deadline; }, clock);
  if (!status) {
    std::cerr << "kube_probe: " << status.error().message() << "\n";
    return 2;
  }
  if (!done()) {
    std::cerr << "kube_probe: timed out\n";
    return 1;
  }
  std::cout << "DONE" << std::endl;
  return 0;
}
