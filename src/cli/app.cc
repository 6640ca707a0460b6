#include "cli/app.h"

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "certctl/util/clock.h"
#include "certctl/util/environment.h"

#include "cli/audit.h"
#include "cli/check.h"
#include "cli/controller.h"
#include "cli/exit_codes.h"
#include "cli/flags.h"
#include "cli/generate.h"
#include "cli/job.h"
#include "cli/logging.h"
#include "cli/rotate.h"
#include "cli/run.h"
#include "cli/unknown_input.h"
#include "cli/version.h"
#include "cli/wait.h"

namespace certctl::cli {
namespace {

// The command as the user typed it: the program name (the app's) and the parsed subcommand.
std::string CommandOf(const CLI::App& app) {
  std::string command = app.get_name();
  for (const CLI::App* sub : app.get_subcommands()) {
    command += " " + sub->get_name();
  }
  return command;
}

// CLI11 reports usage errors over two lines; the contract wants one, naming the command. An
// unknown command or flag is named, with the nearest known one.
int ReportParseError(const CLI::App& app, const CLI::ParseError& error,
                     const std::vector<std::string>& args, bool json_report) {
  if (error.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
    // --help and friends.
    std::cout << app.help();
    return kExitOk;
  }
  const std::string command = CommandOf(app);
  std::string reason = error.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr || app.get_subcommands().empty()) {
    reason = DescribeUnknownInput(app, args).value_or(reason);
  }
  const std::string message = reason + " (see '" + command + " --help')";
  std::cerr << command << ": " << message << "\n";
  if (json_report) {
    PrintCheckError(message);
  }
  return kExitUsage;
}

// The arguments in the reversed order CLI11 consumes them, with `--flag=` (an empty value,
// as getopt reads it) passed as the flag and an empty argument: CLI11 on its own would take
// the next argument as the value.
std::vector<std::string> ArgumentsForParsing(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 1; --i) {
    std::string arg = argv[i];
    if (arg.size() > 3 && arg.starts_with("--") && arg.back() == '=' &&
        arg.find('=') == arg.size() - 1) {
      args.emplace_back();
      arg.pop_back();
    }
    args.push_back(std::move(arg));
  }
  return args;
}

}  // namespace

int Main(const std::string& program, int argc, char** argv) {
  CLI::App app(
      "certctl keeps the TLS trust between the Kubernetes API server and an admission "
      "webhook alive: it creates and validates the webhook's certificates and injects "
      "the CA bundle.",
      program);
  app.require_subcommand(1);
  app.fallthrough();
  app.set_help_all_flag("--help-all", "Show help for every command");

  LoggingFlags logging;
  app.add_option("--log-level", logging.level, "Log level")
      ->check(CLI::IsMember(LogLevelNames()))
      ->capture_default_str();
  app.add_option("--log-format", logging.format, "Log format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();

  GenerateOptions generate;
  CheckOptions check;
  AuditOptions audit;
  WaitOptions wait;
  VersionOptions version;
  JobOptions job;
  RunOptions run;
  RotateOptions rotate;
  ControllerOptions controller;
  CLI::App* generate_command = AddGenerateCommand(app, generate);
  CLI::App* check_command = AddCheckCommand(app, check);
  CLI::App* wait_command = AddWaitCommand(app, wait);
  CLI::App* job_command = AddJobCommand(app, job);
  CLI::App* run_command = AddRunCommand(app, run);
  CLI::App* controller_command = AddControllerCommand(app, controller);
  CLI::App* rotate_command = AddRotateCommand(app, rotate);
  CLI::App* audit_command = AddAuditCommand(app, audit);
  CLI::App* version_command = AddVersionCommand(app, version);

  try {
    app.parse(ArgumentsForParsing(argc, argv));
  } catch (const CLI::CallForHelp&) {
    // The help of the command named last, its usage line starting with the program name.
    std::cout << app.help();
    return kExitOk;
  } catch (const CLI::ParseError& error) {
    return ReportParseError(app, error,
                            std::vector<std::string>(argv + std::min(argc, 1), argv + argc),
                            CheckWantsJson(argc, argv));
  }

  if (auto configured = SetupLogging(logging); !configured) {
    std::cerr << program << ": " << configured.error().message() << "\n";
    if ((check_command->parsed() && check.output == "json") ||
        (audit_command->parsed() && audit.output == "json")) {
      PrintCheckError(configured.error().message());
    }
    return kExitUsage;
  }

  for (const std::string& warning : TakeFlagWarnings()) {
    spdlog::warn("{}", warning);
  }

  const SystemClock clock;
  const SystemEnvironment env;
  const std::string command = CommandOf(app);
  if (generate_command->parsed()) {
    return RunGenerate(generate, command, clock);
  }
  if (check_command->parsed()) {
    return RunCheck(check, command, env, clock);
  }
  if (audit_command->parsed()) {
    return RunAudit(audit, command, env, clock);
  }
  if (wait_command->parsed()) {
    return RunWait(wait, command, clock);
  }
  if (job_command->parsed()) {
    return RunJob(job, command, env, clock);
  }
  if (run_command->parsed()) {
    return RunController(run, command, env, clock);
  }
  if (controller_command->parsed()) {
    return RunClusterController(controller, command, env, clock);
  }
  if (rotate_command->parsed()) {
    return RunRotate(rotate, command, env, clock);
  }
  if (version_command->parsed()) {
    return RunVersion(version);
  }
  return kExitUsage;
}

}  // namespace certctl::cli
