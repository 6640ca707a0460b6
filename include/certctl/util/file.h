#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "certctl/util/result.h"

namespace certctl {

// Whole file as bytes. A missing file is kNotFound; any other failure is kIo with the
// path and the system's reason.
Result<std::string> ReadFile(const std::filesystem::path& path);

// Like ReadFile, but a missing file is an empty optional rather than an error.
Result<std::optional<std::string>> ReadFileIfExists(const std::filesystem::path& path);

// Writes to a temporary file beside `path`, fsyncs it, sets `mode`, then renames it over
// `path`: readers see the old content or the new, never a torn file.
Status WriteFileAtomic(const std::filesystem::path& path, std::string_view content,
                       std::filesystem::perms mode);

}  // namespace certctl
