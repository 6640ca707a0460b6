#include "support/process.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace certctl::testing {
namespace {

void ClosePipe(int fds[2]) {
  for (int i = 0; i < 2; ++i) {
    if (fds[i] >= 0) {
      ::close(fds[i]);
      fds[i] = -1;
    }
  }
}

}  // namespace

ProcessResult RunProcess(const std::vector<std::string>& argv, const ProcessOptions& options) {
  int in_pipe[2] = {-1, -1};
  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  if (::pipe2(in_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0 ||
      ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }

  std::map<std::string, std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string text(*entry);
    const auto eq = text.find('=');
    if (eq != std::string::npos) {
      env[text.substr(0, eq)] = text.substr(eq + 1);
    }
  }
  for (const auto& [key, value] : options.extra_env) {
    env[key] = value;
  }
  std::vector<std::string> env_strings;
  for (const auto& [key, value] : env) {
    env_strings.push_back(key + "=" + value);
  }

  const pid_t pid = ::fork();
  if (pid < 0) {
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::dup2(in_pipe[0], STDIN_FILENO);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    if (!options.working_dir.empty() && ::chdir(options.working_dir.c_str()) != 0) {
      ::_exit(126);
    }
    std::vector<char*> child_argv;
    for (const auto& arg : argv) {
      child_argv.push_back(const_cast<char*>(arg.c_str()));
    }
    child_argv.push_back(nullptr);
    std::vector<char*> child_env;
    for (auto& entry : env_strings) {
      child_env.push_back(entry.data());
    }
    child_env.push_back(nullptr);
    ::execvpe(child_argv[0], child_argv.data(), child_env.data());
    ::_exit(127);
  }
  ::close(in_pipe[0]);
  in_pipe[0] = -1;
  ::close(out_pipe[1]);
  out_pipe[1] = -1;
  ::close(err_pipe[1]);
  err_pipe[1] = -1;

  const std::string input = options.stdin_data.value_or("");
  std::size_t input_written = 0;
  if (input.empty()) {
    ClosePipe(in_pipe);
  } else {
    ::fcntl(in_pipe[1], F_SETFL, O_NONBLOCK);
  }

  ProcessResult result;
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  bool killed = false;
  while (out_pipe[0] >= 0 || err_pipe[0] >= 0) {
    std::vector<pollfd> fds;
    if (out_pipe[0] >= 0) fds.push_back({out_pipe[0], POLLIN, 0});
    if (err_pipe[0] >= 0) fds.push_back({err_pipe[0], POLLIN, 0});
    if (in_pipe[1] >= 0) fds.push_back({in_pipe[1], POLLOUT, 0});
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::kill(pid, SIGKILL);
      killed = true;
      break;
    }
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) {
      break;
    }
    for (const pollfd& fd : fds) {
      if (fd.revents == 0) continue;
      if (fd.fd == in_pipe[1]) {
        const ssize_t count =
            ::write(in_pipe[1], input.data() + input_written, input.size() - input_written);
        if (count > 0) input_written += static_cast<std::size_t>(count);
        if (count < 0 || input_written == input.size()) ClosePipe(in_pipe);
        continue;
      }
      char buffer[8192];
      const ssize_t count = ::read(fd.fd, buffer, sizeof(buffer));
      std::string& sink = fd.fd == out_pipe[0] ? result.out : result.err;
      if (count > 0) {
        sink.append(buffer, static_cast<std::size_t>(count));
      } else if (count == 0 || errno != EINTR) {
        if (fd.fd == out_pipe[0]) {
          ClosePipe(out_pipe);
        } else {
          ClosePipe(err_pipe);
        }
      }
    }
  }
  ClosePipe(in_pipe);
  ClosePipe(out_pipe);
  ClosePipe(err_pipe);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  if (killed) {
    result.err += "\n[killed after timeout]";
  }
  return result;
}

std::string Openssl(const std::vector<std::string>& args,
                    const std::optional<std::string>& stdin_data) {
  std::vector<std::string> argv = {"openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessOptions options;
  options.stdin_data = stdin_data;
  const ProcessResult result = RunProcess(argv, options);
  std::string command;
  for (const auto& arg : argv) {
    command += arg + " ";
  }
  EXPECT_EQ(result.exit_code, 0) << command << "\nstdout: " << result.out
                                 << "\nstderr: " << result.err;
  return result.out;
}

}  // namespace certctl::testing
