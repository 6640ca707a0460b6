#include "certctl/kube/config.h"

#include <filesystem>
#include <map>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "certctl/util/base64.h"
#include "certctl/util/file.h"

namespace certctl::kube {
namespace {

namespace fs = std::filesystem;

std::string Quoted(std::string_view text) { return "\"" + std::string(text) + "\""; }

std::string Trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return {};
  }
  const auto last = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(first, last - first + 1));
}

// ---- In-cluster -------------------------------------------------------------------------------

Result<ClusterConfig> LoadInCluster(const Environment& env) {
  const std::string host = env.Get("KUBERNETES_SERVICE_HOST").value_or("");
  const std::string port = env.Get("KUBERNETES_SERVICE_PORT").value_or("");
  if (host.empty() || port.empty()) {
    return Fail(ErrorCode::kInvalidArgument,
                "unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and "
                "KUBERNETES_SERVICE_PORT must be defined");
  }
  const bool ipv6 = host.find(':') != std::string::npos && host.front() != '[';
  ClusterConfig config;
  config.server = "https://" + (ipv6 ? "[" + host + "]" : host) + ":" + port;
  config.description = "in-cluster";

  const std::string dir_override = env.Get("CERTCTL_SERVICEACCOUNT_DIR").value_or("");
  const fs::path dir = dir_override.empty() ? fs::path(kServiceAccountDir) : fs::path(dir_override);

  // The token itself is read per request (it rotates); read it once now so a pod without a
  // mounted token fails at startup with a clear message.
  config.token_file = (dir / "token").string();
  auto token = ReadFile(config.token_file);
  if (!token) {
    return Fail(token.error().Wrap("in-cluster configuration: service account token"));
  }
  if (Trim(*token).empty()) {
    return Fail(ErrorCode::kInvalidArgument, "in-cluster configuration: service account token " +
                                                 config.token_file + " is empty");
  }
  // Without ca.crt the system trust store is used, as client-go does.
  auto ca = ReadFileIfExists(dir / "ca.crt");
  if (!ca) {
    return Fail(ca.error().Wrap("in-cluster configuration: cluster CA"));
  }
  if (*ca) {
    config.tls.ca_pem = std::move(**ca);
  }
  auto namespace_file = ReadFileIfExists(dir / "namespace");
  if (!namespace_file) {
    return Fail(namespace_file.error().Wrap("in-cluster configuration: namespace"));
  }
  if (*namespace_file) {
    config.namespace_name = Trim(**namespace_file);
  }
  return config;
}

// ---- Kubeconfig -------------------------------------------------------------------------------

// One named cluster, user or context, and the file that defined it (relative paths in it
// resolve against that file's folder).
struct Entry {
  YAML::Node node;  // the inner map: the value of `cluster:`, `user:` or `context:`
  fs::path file;
};

struct Kubeconfig {
  std::string files;  // for messages: "/a" or "/a:/b"
  std::map<std::string, Entry> clusters;
  std::map<std::string, Entry> users;
  std::map<std::string, Entry> contexts;
  std::string current_context;
};

// Reads typed fields of one map, with messages that name the field.
class Fields {
 public:
  Fields(const YAML::Node& node, std::string where) : node_(node), where_(std::move(where)) {}

  const std::string& where() const { return where_; }

  tl::unexpected<Error> Invalid(const std::string& message) const {
    return Fail(ErrorCode::kInvalidArgument, where_ + ": " + message);
  }

  bool Has(const char* key) const {
    if (!node_.IsMap()) {
      return false;
    }
    const YAML::Node value = node_[key];
    return value.IsDefined() && !value.IsNull();
  }

  YAML::Node Get(const char* key) const { return node_.IsMap() ? node_[key] : YAML::Node(); }

  Result<std::string> String(const char* key) const {
    if (!Has(key)) {
      return std::string();
    }
    const YAML::Node value = node_[key];
    if (!value.IsScalar()) {
      return Invalid(std::string(key) + " is not a string");
    }
    return value.Scalar();
  }

  Result<bool> Bool(const char* key) const {
    if (!Has(key)) {
      return false;
    }
    bool result = false;
    const YAML::Node value = node_[key];
    if (!value.IsScalar() || !YAML::convert<bool>::decode(value, result)) {
      return Invalid(std::string(key) + " is not a boolean");
    }
    return result;
  }

  // Decoded base64 content of a *-data field (whitespace and line breaks allowed).
  Result<std::string> Base64(const char* key) const {
    auto text = String(key);
    if (!text) {
      return text;
    }
    std::string compact;
    for (const char c : *text) {
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
        compact += c;
      }
    }
    auto decoded = Base64Decode(compact);
    if (!decoded) {
      return Invalid(std::string(key) + " is not valid base64");
    }
    return decoded;
  }

 private:
  YAML::Node node_;
  std::string where_;
};

fs::path Resolve(const fs::path& file, const std::string& path) {
  const fs::path candidate(path);
  return candidate.is_absolute() ? candidate : file.parent_path() / candidate;
}

// The content of `data_key` if set, else of the file `file_key` names; empty if neither.
Result<std::string> DataOrFile(const Fields& fields, const fs::path& file, const char* data_key,
                               const char* file_key) {
  if (fields.Has(data_key)) {
    return fields.Base64(data_key);
  }
  auto path = fields.String(file_key);
  if (!path || path->empty()) {
    return path;
  }
  auto content = ReadFile(Resolve(file, *path));
  if (!content) {
    return fields.Invalid(std::string(file_key) + ": " + content.error().message());
  }
  return content;
}

Status ExpectPem(const Fields& fields, const std::string& pem, const char* field,
                 std::string_view what) {
  if (pem.find("-----BEGIN ") == std::string::npos ||
      pem.find(std::string(what) + "-----") == std::string::npos) {
    return fields.Invalid(std::string(field) + " does not hold a PEM " +
                          (what == "CERTIFICATE" ? "certificate" : "private key"));
  }
  return {};
}

Status ReadNamedList(const YAML::Node& root, const char* list_key, const char* inner_key,
                     const fs::path& file, std::map<std::string, Entry>& into) {
  const YAML::Node list = root[list_key];
  if (!list.IsDefined() || list.IsNull()) {
    return {};
  }
  const std::string where = "kubeconfig " + file.string();
  if (!list.IsSequence()) {
    return Fail(ErrorCode::kInvalidArgument, where + ": " + list_key + " is not a list");
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YAML::Node item = list[i];
    const std::string position = std::string(list_key) + "[" + std::to_string(i) + "]";
    if (!item.IsMap()) {
      return Fail(ErrorCode::kInvalidArgument, where + ": " + position + " is not a mapping");
    }
    const YAML::Node name = item["name"];
    if (!name.IsDefined() || !name.IsScalar() || name.Scalar().empty()) {
      return Fail(ErrorCode::kInvalidArgument, where + ": " + position + " has no name");
    }
    const YAML::Node inner = item[inner_key];
    if (inner.IsDefined() && !inner.IsNull() && !inner.IsMap()) {
      return Fail(ErrorCode::kInvalidArgument,
                  where + ": " + position + "." + inner_key + " is not a mapping");
    }
    // The first file (and the first entry) to define a name wins, as in kubectl.
    into.emplace(name.Scalar(), Entry{inner, file});
  }
  return {};
}

Status MergeFile(const fs::path& file, const std::string& content, Kubeconfig& merged) {
  const std::string where = "kubeconfig " + file.string();
  YAML::Node root;
  try {
    root = YAML::Load(content);
  } catch (const YAML::Exception& e) {
    return Fail(ErrorCode::kInvalidArgument,
                where + ": invalid YAML at line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!root.IsDefined() || root.IsNull()) {
    return {};  // an empty file is an empty config
  }
  if (!root.IsMap()) {
    return Fail(ErrorCode::kInvalidArgument, where + ": not a kubeconfig (expected a mapping)");
  }
  for (auto read : {ReadNamedList(root, "clusters", "cluster", file, merged.clusters),
                    ReadNamedList(root, "users", "user", file, merged.users),
                    ReadNamedList(root, "contexts", "context", file, merged.contexts)}) {
    if (!read) {
      return read;
    }
  }
  const YAML::Node current = root["current-context"];
  if (merged.current_context.empty() && current.IsDefined() && current.IsScalar()) {
    merged.current_context = current.Scalar();
  }
  return {};
}

// The kubeconfig files to read, in precedence order, and whether a missing one is an error.
struct Sources {
  std::vector<fs::path> files;
  bool skip_missing = false;
  std::string origin;  // for the "nothing found" message
};

Result<Sources> FindSources(const ConfigOptions& options, const Environment& env) {
  Sources sources;
  if (!options.kubeconfig.empty()) {
    sources.files.emplace_back(options.kubeconfig);
    sources.origin = "--kubeconfig " + options.kubeconfig;
    return sources;
  }
  const std::string list = env.Get("KUBECONFIG").value_or("");
  if (!list.empty()) {
    std::size_t start = 0;
    while (start <= list.size()) {
      const std::size_t colon = std::min(list.find(':', start), list.size());
      if (colon > start) {
        sources.files.emplace_back(list.substr(start, colon - start));
      }
      start = colon + 1;
    }
    sources.skip_missing = true;
    sources.origin = "KUBECONFIG=" + list;
    return sources;
  }
  const std::string home = env.Get("HOME").value_or("");
  if (home.empty()) {
    return Fail(ErrorCode::kInvalidArgument,
                "no cluster configuration: KUBERNETES_SERVICE_HOST, KUBECONFIG and HOME are "
                "unset; pass --kubeconfig");
  }
  sources.files.push_back(fs::path(home) / ".kube" / "config");
  sources.origin = sources.files.back().string();
  return sources;
}

// The kubeconfig files `options` and the environment lead to, merged.
Result<Kubeconfig> ReadKubeconfig(const ConfigOptions& options, const Environment& env) {
  auto found = FindSources(options, env);
  if (!found) {
    return Fail(found.error());
  }
  const Sources& sources = *found;
  Kubeconfig merged;
  std::vector<std::string> read;
  for (const fs::path& file : sources.files) {
    auto content = ReadFile(file);
    if (!content) {
      if (content.error().code() == ErrorCode::kNotFound && sources.skip_missing) {
        continue;
      }
      return Fail(ErrorCode::kInvalidArgument, "kubeconfig: " + content.error().message());
    }
    if (auto merged_file = MergeFile(file, *content, merged); !merged_file) {
      return Fail(merged_file.error());
    }
    read.push_back(file.string());
  }
  if (read.empty()) {
    return Fail(ErrorCode::kInvalidArgument,
                "kubeconfig: none of the files in " + sources.origin + " exists");
  }
  for (const std::string& file : read) {
    merged.files += (merged.files.empty() ? "" : ":") + file;
  }
  return merged;
}

Status ApplyCluster(const Entry& entry, const std::string& name, ClusterConfig& config) {
  const Fields fields(entry.node,
                      "kubeconfig " + entry.file.string() + ": cluster " + Quoted(name));
  auto server = fields.String("server");
  if (!server) {
    return Fail(server.error());
  }
  if (server->empty()) {
    return fields.Invalid("server is not set");
  }
  std::string url = Trim(*server);
  if (url.find("://") == std::string::npos) {
    url = "https://" + url;  // kubectl's default scheme
  }
  if (url.rfind("https://", 0) != 0 && url.rfind("http://", 0) != 0) {
    return fields.Invalid("server " + Quoted(url) + " is not an http(s) URL");
  }
  const std::size_t host_at = url.find("://") + 3;
  while (url.size() > host_at && url.back() == '/') {
    url.pop_back();
  }
  if (url.size() == host_at) {
    return fields.Invalid("server " + Quoted(url) + " names no host");
  }
  config.server = url;

  auto ca = DataOrFile(fields, entry.file, "certificate-authority-data", "certificate-authority");
  if (!ca) {
    return Fail(ca.error());
  }
  if (!ca->empty()) {
    const char* field = fields.Has("certificate-authority-data") ? "certificate-authority-data"
                                                                 : "certificate-authority";
    if (auto pem = ExpectPem(fields, *ca, field, "CERTIFICATE"); !pem) {
      return pem;
    }
  }
  auto insecure = fields.Bool("insecure-skip-tls-verify");
  if (!insecure) {
    return Fail(insecure.error());
  }
  if (*insecure && !ca->empty()) {
    return fields.Invalid(
        "insecure-skip-tls-verify cannot be combined with certificate-authority(-data)");
  }
  config.tls.ca_pem = std::move(*ca);
  config.tls.insecure_skip_verify = *insecure;
  auto server_name = fields.String("tls-server-name");
  if (!server_name) {
    return Fail(server_name.error());
  }
  config.tls.server_name = *server_name;
  if (fields.Has("proxy-url")) {
    return fields.Invalid("proxy-url is not supported; set HTTPS_PROXY instead");
  }
  return {};
}

Result<ExecCredential> ReadExec(const Fields& user, const fs::path& file) {
  const Fields fields(user.Get("exec"), user.where() + ": exec");
  ExecCredential exec;
  auto command = fields.String("command");
  if (!command) {
    return Fail(command.error());
  }
  if (command->empty()) {
    return fields.Invalid("command is not set");
  }
  // A relative command with a slash is relative to the kubeconfig; a bare name is looked up
  // in PATH (client-go's rule).
  exec.command =
      command->find('/') != std::string::npos ? Resolve(file, *command).string() : *command;
  auto api_version = fields.String("apiVersion");
  if (!api_version) {
    return Fail(api_version.error());
  }
  if (*api_version != "client.authentication.k8s.io/v1" &&
      *api_version != "client.authentication.k8s.io/v1beta1") {
    return fields.Invalid("apiVersion " + Quoted(*api_version) +
                          " is not supported (use client.authentication.k8s.io/v1 or v1beta1)");
  }
  exec.api_version = *api_version;
  const YAML::Node args = fields.Get("args");
  if (args.IsDefined() && !args.IsNull()) {
    if (!args.IsSequence()) {
      return fields.Invalid("args is not a list");
    }
    for (const YAML::Node& arg : args) {
      if (!arg.IsScalar()) {
        return fields.Invalid("args holds something other than strings");
      }
      exec.args.push_back(arg.Scalar());
    }
  }
  const YAML::Node env = fields.Get("env");
  if (env.IsDefined() && !env.IsNull()) {
    if (!env.IsSequence()) {
      return fields.Invalid("env is not a list");
    }
    for (const YAML::Node& variable : env) {
      const Fields entry(variable, fields.where() + ": env");
      auto name = entry.String("name");
      auto value = entry.String("value");
      if (!variable.IsMap() || !name || !value || name->empty()) {
        return fields.Invalid("env entries need a name and a value");
      }
      exec.env.emplace_back(*name, *value);
    }
  }
  auto interactive = fields.String("interactiveMode");
  if (interactive && *interactive == "Always") {
    return fields.Invalid("interactiveMode Always is not supported: certctl never has a terminal");
  }
  return exec;
}

Status ApplyUser(const Entry& entry, const std::string& name, ClusterConfig& config) {
  const Fields fields(entry.node, "kubeconfig " + entry.file.string() + ": user " + Quoted(name));
  if (fields.Has("auth-provider")) {
    return fields.Invalid("auth-provider is not supported; use an exec credential plugin");
  }
  if (fields.Has("username") || fields.Has("password")) {
    return fields.Invalid("basic authentication (username/password) is not supported");
  }
  for (const char* key : {"as", "as-uid", "as-groups", "as-user-extra"}) {
    if (fields.Has(key)) {
      return fields.Invalid(std::string("impersonation (") + key + ") is not supported");
    }
  }
  auto token = fields.String("token");
  if (!token) {
    return Fail(token.error());
  }
  config.token = Trim(*token);
  auto token_file = fields.String("tokenFile");
  if (!token_file) {
    return Fail(token_file.error());
  }
  if (!token_file->empty()) {
    config.token_file = Resolve(entry.file, *token_file).string();
  }

  auto cert = DataOrFile(fields, entry.file, "client-certificate-data", "client-certificate");
  if (!cert) {
    return Fail(cert.error());
  }
  auto key = DataOrFile(fields, entry.file, "client-key-data", "client-key");
  if (!key) {
    return Fail(key.error());
  }
  if (cert->empty() != key->empty()) {
    return fields.Invalid(cert->empty() ? "client-key is set without client-certificate"
                                        : "client-certificate is set without client-key");
  }
  if (!cert->empty()) {
    if (auto pem = ExpectPem(fields, *cert,
                             fields.Has("client-certificate-data") ? "client-certificate-data"
                                                                   : "client-certificate",
                             "CERTIFICATE");
        !pem) {
      return pem;
    }
    if (auto pem = ExpectPem(fields, *key,
                             fields.Has("client-key-data") ? "client-key-data" : "client-key",
                             "PRIVATE KEY");
        !pem) {
      return pem;
    }
  }
  config.tls.client_cert_pem = std::move(*cert);
  config.tls.client_key_pem = std::move(*key);

  if (fields.Has("exec")) {
    if (!fields.Get("exec").IsMap()) {
      return fields.Invalid("exec is not a mapping");
    }
    auto exec = ReadExec(fields, entry.file);
    if (!exec) {
      return Fail(exec.error());
    }
    config.exec = std::move(*exec);
  }
  return {};
}

Result<ClusterConfig> LoadKubeconfig(const ConfigOptions& options, const Environment& env) {
  auto kubeconfig = ReadKubeconfig(options, env);
  if (!kubeconfig) {
    return Fail(kubeconfig.error());
  }
  const std::string where = "kubeconfig " + kubeconfig->files;
  const std::string context_name =
      options.context.empty() ? kubeconfig->current_context : options.context;
  if (context_name.empty()) {
    return Fail(ErrorCode::kInvalidArgument,
                where + ": current-context is not set; pass --context");
  }
  const auto context = kubeconfig->contexts.find(context_name);
  if (context == kubeconfig->contexts.end()) {
    return Fail(ErrorCode::kInvalidArgument,
                where + ": context " + Quoted(context_name) + " not found");
  }
  const Fields context_fields(context->second.node, "kubeconfig " + context->second.file.string() +
                                                        ": context " + Quoted(context_name));
  auto cluster_name = context_fields.String("cluster");
  auto user_name = context_fields.String("user");
  auto namespace_name = context_fields.String("namespace");
  for (const auto* field : {&cluster_name, &user_name, &namespace_name}) {
    if (!*field) {
      return Fail(field->error());
    }
  }
  if (cluster_name->empty()) {
    return context_fields.Invalid("cluster is not set");
  }
  const auto cluster = kubeconfig->clusters.find(*cluster_name);
  if (cluster == kubeconfig->clusters.end()) {
    return context_fields.Invalid("cluster " + Quoted(*cluster_name) + " not found");
  }

  ClusterConfig config;
  config.namespace_name = *namespace_name;
  config.description = where + ", context " + context_name;
  if (auto applied = ApplyCluster(cluster->second, *cluster_name, config); !applied) {
    return Fail(applied.error());
  }
  if (!user_name->empty()) {
    const auto user = kubeconfig->users.find(*user_name);
    if (user == kubeconfig->users.end()) {
      return context_fields.Invalid("user " + Quoted(*user_name) + " not found");
    }
    // kubectl sends credentials only over TLS; so do we.
    if (config.server.rfind("https://", 0) == 0) {
      if (auto applied = ApplyUser(user->second, *user_name, config); !applied) {
        return Fail(applied.error());
      }
    }
  }
  return config;
}

}  // namespace

Result<ClusterConfig> LoadClusterConfig(const ConfigOptions& options, const Environment& env) {
  try {
    if (options.kubeconfig.empty() && !env.Get("KUBERNETES_SERVICE_HOST").value_or("").empty()) {
      return LoadInCluster(env);
    }
    return LoadKubeconfig(options, env);
  } catch (const YAML::Exception& e) {
    // Field access above checks types first; this is only a last line of defence.
    return Fail(ErrorCode::kInvalidArgument, "kubeconfig: " + std::string(e.what()));
  }
}

Result<std::vector<std::string>> KubeconfigContexts(const ConfigOptions& options,
                                                    const Environment& env) {
  try {
    auto kubeconfig = ReadKubeconfig(options, env);
    if (!kubeconfig) {
      return Fail(kubeconfig.error());
    }
    std::vector<std::string> names;
    for (const auto& [name, entry] : kubeconfig->contexts) {
      names.push_back(name);
    }
    return names;
  } catch (const YAML::Exception& e) {
    return Fail(ErrorCode::kInvalidArgument, "kubeconfig: " + std::string(e.what()));
  }
}

std::string ResolveNamespace(const std::string& flag, const Environment& env,
                             const ClusterConfig& config) {
  if (!flag.empty()) {
    return flag;
  }
  if (auto pod_namespace = env.Get("POD_NAMESPACE"); pod_namespace && !pod_namespace->empty()) {
    return *pod_namespace;
  }
  if (!config.namespace_name.empty()) {
    return config.namespace_name;
  }
  return "default";
}

}  // namespace certctl::kube
