#include "cli/unknown_input.h"

#include <algorithm>
#include <cstddef>

#include "certctl/util/text.h"

namespace certctl::cli {
namespace {

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
// neighbouring characters each cost one.
std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) {
    d[i][0] = i;
  }
  for (std::size_t j = 0; j <= b.size(); ++j) {
    d[0][j] = j;
  }
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// The long and short names of every option of `app`, with their dashes.
std::vector<std::string> FlagNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) {
      names.push_back("--" + name);
    }
    for (const std::string& name : option->get_snames()) {
      names.push_back("-" + name);
    }
  }
  return names;
}

std::vector<std::string> CommandNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* command : app.get_subcommands({})) {
    names.push_back(command->get_name());
  }
  return names;
}

std::string Quoted(std::string_view text) { return "\"" + std::string(text) + "\""; }

std::string Suggestion(std::string_view word, const std::vector<std::string>& candidates) {
  auto nearest = Nearest(word, candidates);
  return nearest ? "; did you mean " + *nearest + "?" : "";
}

// The option an argument names: "--flag", "--flag=value", "-n", or "-nvalue".
std::string FlagName(std::string_view arg) {
  if (!arg.starts_with("--")) {
    return std::string(arg.substr(0, 2));
  }
  return std::string(arg.substr(0, arg.find('=')));
}

// True when `arg` names the option without its value, which is then the next argument.
bool ValueFollows(const CLI::Option& option, std::string_view arg) {
  const bool attached =
      arg.starts_with("--") ? arg.find('=') != std::string_view::npos : arg.size() > 2;
  return option.get_expected_max() != 0 && !attached;  // 0: a flag without a value
}

const CLI::App* FindCommand(const CLI::App& app, std::string_view name) {
  for (const CLI::App* command : app.get_subcommands({})) {
    if (command->get_name() == name) {
      return command;
    }
  }
  return nullptr;
}

bool TakesPositionals(const CLI::App& command) {
  const auto options = command.get_options();
  return std::any_of(options.begin(), options.end(),
                     [](const CLI::Option* option) { return option->get_positional(); });
}

}  // namespace

std::optional<std::string> Nearest(std::string_view word,
                                   const std::vector<std::string>& candidates) {
  // Compared without leading dashes, so "-servce" still finds "--service".
  const auto bare = [](std::string_view s) {
    return s.substr(std::min(s.find_first_not_of('-'), s.size()));
  };
  const std::string_view typed = bare(word);
  if (typed.empty()) {
    return std::nullopt;
  }
  const std::size_t allowed = typed.size() <= 4 ? 1 : 2;
  std::optional<std::string> best;
  std::size_t best_distance = allowed + 1;
  for (const std::string& candidate : candidates) {
    const std::string_view name = bare(candidate);
    std::size_t distance = EditDistance(typed, name);
    if (distance > allowed && typed.size() >= 3 && name.starts_with(typed)) {
      distance = allowed;  // an abbreviation: "gen" for generate
    }
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

std::optional<std::string> DescribeUnknownInput(const CLI::App& app,
                                                const std::vector<std::string>& args) {
  const CLI::App* command = nullptr;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      break;  // what follows is wait's command to exec
    }
    if (arg.size() > 1 && arg[0] == '-') {
      const std::string name = FlagName(arg);
      const CLI::Option* option = command != nullptr ? command->get_option_no_throw(name) : nullptr;
      if (option == nullptr) {
        option = app.get_option_no_throw(name);  // --log-level and the like, anywhere
      }
      if (option == nullptr) {
        std::vector<std::string> known = FlagNames(app);
        if (command != nullptr) {
          const std::vector<std::string> own = FlagNames(*command);
          known.insert(known.begin(), own.begin(), own.end());
        }
        return "unknown flag " + name + Suggestion(name, known);
      }
      if (ValueFollows(*option, arg)) {
        ++i;  // a value, not a command or an argument
        // A repeatable option takes every value up to the next flag ("--dns-name a b").
        while (option->get_expected_max() > 1 && i + 1 < args.size() &&
               !args[i + 1].starts_with("-")) {
          ++i;
        }
      }
      continue;
    }
    if (command == nullptr) {
      command = FindCommand(app, arg);
      if (command == nullptr) {
        return "unknown command " + Quoted(arg) + Suggestion(arg, CommandNames(app));
      }
      continue;
    }
    if (!TakesPositionals(*command)) {
      return "unexpected argument " + Quoted(arg) + ": " + command->get_name() +
             " takes only flags";
    }
  }
  if (command == nullptr) {
    return "a command is required: one of " + JoinWithCommas(CommandNames(app));
  }
  return std::nullopt;
}

}  // namespace certctl::cli
