#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace certctl::cli {

// Of `candidates`, the one `word` most likely misspells: within two edits (one for words of
// up to four letters; a swap of neighbours counts as one) or a prefix of it, the closest
// first. Nullopt when none is close.
std::optional<std::string> Nearest(std::string_view word,
                                   const std::vector<std::string>& candidates);

// What CLI11 reports as "A subcommand is required" or "The following arguments were not
// expected", said the way a user can act on: the unknown command or flag by name, with the
// nearest known one. `args` is argv without the program name. Nullopt when the arguments
// hold nothing unknown (CLI11's own message then stands).
std::optional<std::string> DescribeUnknownInput(const CLI::App& app,
                                                const std::vector<std::string>& args);

}  // namespace certctl::cli
