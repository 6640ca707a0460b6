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

// Creates `dir` and any missing parents with exactly `mode` (the umask does not widen or
// narrow it); folders that exist already are left as they are. A path that exists but is
// not a folder is kIo.
Status CreateDirectories(const std::filesystem::path& dir, std::filesystem::perms mode);

// fsyncs a folder, so the renames and creations in it survive a crash.
Status SyncDirectory(const std::filesystem::path& dir);

}  // namespace certctl
