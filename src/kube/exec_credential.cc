#include "kube/exec_credential.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "certctl/util/duration.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace certctl::kube {
namespace {

// An ExecCredential is a few kilobytes; anything far bigger is not one.
constexpr std::size_t kMaxOutput = 4 * 1024 * 1024;

std::string Describe(const ExecCredential& exec) { return "exec plugin \"" + exec.command + "\""; }

tl::unexpected<Error> PluginFailure(const ExecCredential& exec, const std::string& why) {
  return Fail(ErrorCode::kUnauthenticated, Describe(exec) + ": " + why);
}

// Closes a descriptor on every path out.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Close(); }
  int get() const { return fd_; }
  void Close() {
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }

 private:
  int fd_;
};

class SpawnAttributes {
 public:
  SpawnAttributes() { ::posix_spawnattr_init(&attributes_); }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
  ~SpawnAttributes() { ::posix_spawnattr_destroy(&attributes_); }
  posix_spawnattr_t* get() { return &attributes_; }

 private:
  posix_spawnattr_t attributes_;
};

class FileActions {
 public:
  FileActions() { ::posix_spawn_file_actions_init(&actions_); }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;
  ~FileActions() { ::posix_spawn_file_actions_destroy(&actions_); }
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

std::string ExecInfo(const ExecCredential& exec) {
  nlohmann::json info = {{"apiVersion", exec.api_version},
                         {"kind", "ExecCredential"},
                         {"spec", {{"interactive", false}}}};
  return info.dump();
}

// The process environment, with the plugin's own variables and KUBERNETES_EXEC_INFO on top.
std::vector<std::string> PluginEnvironment(const ExecCredential& exec) {
  std::vector<std::pair<std::string, std::string>> overrides = exec.env;
  overrides.emplace_back("KUBERNETES_EXEC_INFO", ExecInfo(exec));
  std::vector<std::string> result;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view variable(*entry);
    const std::string_view name = variable.substr(0, variable.find('='));
    bool overridden = false;
    for (const auto& [override_name, value] : overrides) {
      overridden = overridden || override_name == name;
    }
    if (!overridden) {
      result.emplace_back(variable);
    }
  }
  for (const auto& [name, value] : overrides) {
    result.push_back(name + "=" + value);
  }
  return result;
}

std::string ExitDescription(int status) {
  if (WIFEXITED(status)) {
    return "exited with status " + std::to_string(WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return "was killed by signal " + std::to_string(WTERMSIG(status));
  }
  return "ended abnormally";
}

int WaitForChild(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// The child's exit status, or nothing when it is still running at `deadline`. Polls:
// the plugin has closed its output by now, so it is expected to exit at once.
std::optional<int> WaitForChildUntil(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  constexpr auto kPollInterval = std::chrono::milliseconds(5);
  while (true) {
    int status = 0;
    const pid_t reaped = ::waitpid(pid, &status, WNOHANG);
    if (reaped == pid) {
      return status;
    }
    if (reaped < 0 && errno != EINTR) {
      return std::nullopt;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return std::nullopt;
    }
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(kPollInterval, deadline - now));
  }
}

// Ends everything the plugin started: its process group, which outlives the plugin itself
// while any member is left.
void KillPluginGroup(pid_t pid) { ::kill(-pid, SIGKILL); }

std::string Describe(std::chrono::milliseconds timeout) {
  if (timeout % std::chrono::seconds(1) == std::chrono::milliseconds::zero()) {
    return FormatDuration(std::chrono::duration_cast<std::chrono::seconds>(timeout));
  }
  return std::to_string(timeout.count()) + "ms";
}

}  // namespace

Result<ExecToken> ParseExecCredential(std::string_view output, const ExecCredential& exec) {
  const nlohmann::json credential = nlohmann::json::parse(output, nullptr, false);
  if (!credential.is_object()) {
    return PluginFailure(exec, "output is not an ExecCredential JSON object");
  }
  const auto kind = credential.find("kind");
  if (kind == credential.end() || !kind->is_string() || *kind != "ExecCredential") {
    return PluginFailure(exec, "output has kind other than \"ExecCredential\"");
  }
  const auto api_version = credential.find("apiVersion");
  if (api_version == credential.end() || !api_version->is_string() ||
      *api_version != exec.api_version) {
    return PluginFailure(exec, "output apiVersion does not match \"" + exec.api_version + "\"");
  }
  const auto status = credential.find("status");
  if (status == credential.end() || !status->is_object()) {
    return PluginFailure(exec, "output has no status");
  }
  const auto token = status->find("token");
  if (token == status->end() || !token->is_string() || token->get<std::string>().empty()) {
    if (status->contains("clientCertificateData")) {
      return PluginFailure(exec, "returned a client certificate; only bearer tokens are supported");
    }
    return PluginFailure(exec, "output has no status.token");
  }
  ExecToken result{token->get<std::string>(), std::nullopt};
  const auto expiry = status->find("expirationTimestamp");
  if (expiry != status->end() && !expiry->is_null()) {
    if (!expiry->is_string()) {
      return PluginFailure(exec, "status.expirationTimestamp is not a string");
    }
    auto parsed = ParseRfc3339(expiry->get<std::string>());
    if (!parsed) {
      return PluginFailure(exec, "status.expirationTimestamp: " + parsed.error().message());
    }
    result.expiry = *parsed;
  }
  return result;
}

Result<ExecToken> RunExecPlugin(const ExecCredential& exec, std::chrono::milliseconds timeout) {
  if (exec.command.empty()) {
    return Fail(ErrorCode::kUnauthenticated, "exec plugin: no command");
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return PluginFailure(exec, std::string("cannot create a pipe: ") + std::strerror(errno));
  }
  Fd read_end(pipe_fds[0]);
  Fd write_end(pipe_fds[1]);

  FileActions actions;
  ::posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_adddup2(actions.get(), write_end.get(), STDOUT_FILENO);

  std::vector<std::string> arguments;
  arguments.push_back(exec.command);
  arguments.insert(arguments.end(), exec.args.begin(), exec.args.end());
  std::vector<char*> argv;
  for (std::string& argument : arguments) {
    argv.push_back(argument.data());
  }
  argv.push_back(nullptr);
  std::vector<std::string> environment = PluginEnvironment(exec);
  std::vector<char*> envp;
  for (std::string& variable : environment) {
    envp.push_back(variable.data());
  }
  envp.push_back(nullptr);

  // A group of its own (its pgid is its pid), so a timeout can kill what it started too.
  SpawnAttributes attributes;
  ::posix_spawnattr_setflags(attributes.get(), POSIX_SPAWN_SETPGROUP);
  ::posix_spawnattr_setpgroup(attributes.get(), 0);

  pid_t pid = 0;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // A command without a slash is looked up in PATH, like exec.Command in Go.
  const bool search_path = exec.command.find('/') == std::string::npos;
  const int spawned = search_path ? ::posix_spawnp(&pid, exec.command.c_str(), actions.get(),
                                                   attributes.get(), argv.data(), envp.data())
                                  : ::posix_spawn(&pid, exec.command.c_str(), actions.get(),
                                                  attributes.get(), argv.data(), envp.data());
  if (spawned != 0) {
    return PluginFailure(exec, std::string("cannot run: ") + std::strerror(spawned));
  }
  write_end.Close();

  std::string output;
  std::string failure;
  char buffer[8192];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      failure = "did not finish within " + Describe(timeout);
      break;
    }
    pollfd waiting{read_end.get(), POLLIN, 0};
    const int ready = ::poll(&waiting, 1, static_cast<int>(left.count()));
    if (ready < 0) {
      if (errno == EINTR) {
        continue;
      }
      failure = std::string("cannot read its output: ") + std::strerror(errno);
      break;
    }
    if (ready == 0) {
      continue;
    }
    const ssize_t count = ::read(read_end.get(), buffer, sizeof(buffer));
    if (count < 0) {
      if (errno == EINTR || errno == EAGAIN) {
        continue;
      }
      failure = std::string("cannot read its output: ") + std::strerror(errno);
      break;
    }
    if (count == 0) {
      break;
    }
    output.append(buffer, static_cast<std::size_t>(count));
    if (output.size() > kMaxOutput) {
      failure = "printed more than " + std::to_string(kMaxOutput) + " bytes";
      break;
    }
  }
  if (!failure.empty()) {
    KillPluginGroup(pid);
    WaitForChild(pid);
    return PluginFailure(exec, failure);
  }
  read_end.Close();
  // Closing its output is not the end: a plugin that lingers after it is on the same clock.
  const std::optional<int> status = WaitForChildUntil(pid, deadline);
  if (!status) {
    KillPluginGroup(pid);
    WaitForChild(pid);
    return PluginFailure(exec, "closed its output but did not exit within " + Describe(timeout));
  }
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    KillPluginGroup(pid);
    return PluginFailure(exec, ExitDescription(*status));
  }
  return ParseExecCredential(output, exec);
}

}  // namespace certctl::kube
