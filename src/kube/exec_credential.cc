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

// Whether the plugin has exited. It is left a zombie, not reaped, so its pid (and so its
// process group's id) stays taken until WaitForChild.
bool HasExited(pid_t pid) {
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    if (errno != EINTR) {
      return false;  // not our child any more: the end of its output tells instead
    }
  }
  return info.si_pid == pid;
}

struct PluginOutput {
  std::string text;
  bool timed_out = false;
  std::string failure;         // why the output could not be read
  bool plugin_exited = false;  // it exited before its output ended
  bool held_open = false;      // and something it started still holds the output open
};

enum class Chunk { kMore, kEnded, kWouldBlock, kFailed };

// One read() of the plugin's output into `output`.
Chunk ReadChunk(int fd, PluginOutput& output) {
  char buffer[8192];
  const ssize_t count = ::read(fd, buffer, sizeof(buffer));
  if (count < 0) {
    if (errno == EINTR) {
      return Chunk::kMore;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return Chunk::kWouldBlock;
    }
    output.failure = std::string("cannot read its output: ") + std::strerror(errno);
    return Chunk::kFailed;
  }
  if (count == 0) {
    return Chunk::kEnded;
  }
  output.text.append(buffer, static_cast<std::size_t>(count));
  if (output.text.size() > kMaxOutput) {
    output.failure = "printed more than " + std::to_string(kMaxOutput) + " bytes";
    return Chunk::kFailed;
  }
  return Chunk::kMore;
}

// Takes what the output holds now, without waiting for more.
void Drain(int fd, PluginOutput& output) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    output.failure = std::string("cannot read its output: ") + std::strerror(errno);
    return;
  }
  Chunk chunk = Chunk::kMore;
  while (chunk == Chunk::kMore) {
    chunk = ReadChunk(fd, output);
  }
  output.held_open = chunk == Chunk::kWouldBlock;
}

// Reads the plugin's output until it ends or the plugin exits, whichever comes first: a
// helper the plugin started may inherit its output and hold it open long after the plugin
// is done, and what the plugin printed is all in the pipe by the time it exited.
PluginOutput ReadPluginOutput(int fd, pid_t pid, std::chrono::steady_clock::time_point deadline) {
  // How often the plugin's exit is looked for while its output stays quiet.
  constexpr std::chrono::milliseconds kExitCheckInterval{20};
  PluginOutput output;
  while (true) {
    if (HasExited(pid)) {
      output.plugin_exited = true;
      Drain(fd, output);
      return output;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      output.timed_out = true;
      return output;
    }
    pollfd waiting{fd, POLLIN, 0};
    const int ready =
        ::poll(&waiting, 1, static_cast<int>(std::min(left, kExitCheckInterval).count()));
    if (ready < 0 && errno != EINTR) {
      output.failure = std::string("cannot read its output: ") + std::strerror(errno);
      return output;
    }
    if (ready > 0) {
      const Chunk chunk = ReadChunk(fd, output);
      if (chunk == Chunk::kEnded || chunk == Chunk::kFailed) {
        return output;
      }
    }
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

  PluginOutput read = ReadPluginOutput(read_end.get(), pid, deadline);
  if (read.timed_out || !read.failure.empty()) {
    KillPluginGroup(pid);
    WaitForChild(pid);
    return PluginFailure(
        exec, read.timed_out ? "did not finish within " + Describe(timeout) : read.failure);
  }
  read_end.Close();
  std::optional<int> status;
  if (read.plugin_exited) {
    if (read.held_open) {
      // Helpers it started still hold its output: they are part of this exchange, now over.
      // The plugin is not reaped yet, so its group's id cannot have been reused.
      KillPluginGroup(pid);
    }
    status = WaitForChild(pid);
  } else {
    // Closing its output is not the end: a plugin that lingers after it is on the same clock.
    status = WaitForChildUntil(pid, deadline);
  }
  if (!status) {
    KillPluginGroup(pid);
    WaitForChild(pid);
    return PluginFailure(exec, "closed its output but did not exit within " + Describe(timeout));
  }
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    KillPluginGroup(pid);
    return PluginFailure(exec, ExitDescription(*status));
  }
  return ParseExecCredential(read.text, exec);
}

}  // namespace certctl::kube
