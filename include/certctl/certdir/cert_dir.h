#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "certctl/util/clock.h"
#include "certctl/util/result.h"

namespace certctl::certdir {

// The files a webhook server reads from its certificate folder.
struct ServingFiles {
  std::string tls_crt;
  std::string tls_key;
  std::string ca_crt;

  bool operator==(const ServingFiles&) const = default;
};

// The link that names the folder holding the current set, as the kubelet does for projected
// volumes: DIR/tls.crt -> ..data/tls.crt, DIR/..data -> ..2026_01_31_12_00_00.<random>.
inline constexpr char kDataLink[] = "..data";

// What DIR/tls.crt, DIR/tls.key and DIR/ca.crt hold now (links followed), or nothing when any
// of them is missing. Unreadable files are kIo naming the path.
Result<std::optional<ServingFiles>> ReadServingFiles(const std::filesystem::path& dir);

enum class Publish { kUnchanged, kReplaced };

// Makes DIR serve `files`, swapping all three at once: they are written and fsynced into a
// new folder named for `now`, then the ..data link is renamed over to point at it, so a
// reader sees the old set or the new, never a key from one and a certificate from the other.
// The visible names are relative links into ..data (regular files left by an earlier
// writer are replaced by them). The set just replaced stays until RemoveStaleSets, since a
// reader that followed ..data an instant before the swap may still be opening its files;
// older sets and the leftovers of an interrupted run are removed after the swap, by the
// rules of RemoveStaleSets. Nothing is written when DIR already serves `files`. The key is
// 0600, the certificates 0644, a created DIR 0755. Failures are kIo naming the path; they leave the
// set that was served in place.
Result<Publish> PublishServingFiles(const std::filesystem::path& dir, const ServingFiles& files,
                                    TimePoint now);

// Removes every set folder but the one ..data names: call it a moment after a swap, once
// readers of the replaced set are done. Only what certctl wrote is removed: a folder named
// exactly as PublishServingFiles names a set, holding nothing but regular files it writes
// there; links are never followed. Returns the folders named like sets that hold anything
// else (a user's lookalike, or a set someone added a file to): they are left as they are.
// Failures cost disk space only and are ignored.
std::vector<std::string> RemoveStaleSets(const std::filesystem::path& dir);

}  // namespace certctl::certdir
