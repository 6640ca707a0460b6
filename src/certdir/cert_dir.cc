#include "certctl/certdir/cert_dir.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string_view>
#include <system_error>
#include <vector>

#include "certctl/util/file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace certctl::certdir {
namespace {

namespace fs = std::filesystem;

constexpr char kCertFile[] = "tls.crt";
constexpr char kKeyFile[] = "tls.key";
constexpr char kCaFile[] = "ca.crt";
constexpr char kDataLinkStaging[] = "..data_tmp";

constexpr fs::perms kPublic =
    fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read;
constexpr fs::perms kPrivate = fs::perms::owner_read | fs::perms::owner_write;
constexpr fs::perms kFolder = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec;

struct Entry {
  const char* name;
  const std::string* content;
  fs::perms mode;
};

std::array<Entry, 3> EntriesOf(const ServingFiles& files) {
  // Key first: a reader of an unfinished folder would find no certificate without its key.
  return {{{kKeyFile, &files.tls_key, kPrivate},
           {kCertFile, &files.tls_crt, kPublic},
           {kCaFile, &files.ca_crt, kPublic}}};
}

tl::unexpected<Error> Failure(const fs::path& path, std::string_view step, int error_number) {
  return Fail(ErrorCode::kIo, "certificate folder: cannot " + std::string(step) + " " +
                                  path.string() + ": " + std::strerror(error_number));
}

// "..2026_01_31_12_00_00.": the prefix of a set's folder, sortable and readable by people.
std::string SetFolderPrefix(TimePoint now) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "..%Y_%m_%d_%H_%M_%S.", &utc);
  return text.data();
}

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// Whether `name` is what WriteSetFolder names a set's folder: SetFolderPrefix's
// "..YYYY_MM_DD_HH_MM_SS." and mkdtemp's six letters or digits, nothing more or less.
bool IsSetFolderName(std::string_view name) {
  constexpr std::string_view kShape = "..dddd_dd_dd_dd_dd_dd.aaaaaa";
  if (name.size() != kShape.size()) {
    return false;
  }
  for (std::size_t i = 0; i < kShape.size(); ++i) {
    const bool fits = kShape[i] == 'd'   ? std::isdigit(static_cast<unsigned char>(name[i])) != 0
                      : kShape[i] == 'a' ? IsAlnum(name[i])
                                         : name[i] == kShape[i];
    if (!fits) {
      return false;
    }
  }
  return true;
}

// The files WriteSetFolder puts in a set's folder: the three, and the temporaries
// WriteFileAtomic leaves beside one when it is interrupted (".tls.key.tmp-<random>").
bool IsSetFileName(std::string_view name) {
  for (const std::string_view file : {kCertFile, kKeyFile, kCaFile}) {
    if (name == file) {
      return true;
    }
    const std::string temporary = "." + std::string(file) + ".tmp-";
    if (name.size() > temporary.size() && name.starts_with(temporary) &&
        std::all_of(name.begin() + static_cast<std::ptrdiff_t>(temporary.size()), name.end(),
                    IsAlnum)) {
      return true;
    }
  }
  return false;
}

std::optional<std::string> LinkTarget(const fs::path& link) {
  std::error_code error;
  const fs::path target = fs::read_symlink(link, error);
  if (error) {
    return std::nullopt;
  }
  return target.string();
}

// Points `link` at `target` by renaming a fresh link over it: atomic for readers.
Status ReplaceWithLink(const fs::path& link, const std::string& target, const fs::path& staging) {
  ::unlink(staging.c_str());
  if (::symlink(target.c_str(), staging.c_str()) != 0) {
    return Failure(staging, "create link", errno);
  }
  if (::rename(staging.c_str(), link.c_str()) != 0) {
    const int error_number = errno;
    ::unlink(staging.c_str());
    return Failure(link, "replace", error_number);
  }
  return {};
}

Result<fs::path> WriteSetFolder(const fs::path& dir, const ServingFiles& files, TimePoint now) {
  std::string pattern = (dir / (SetFolderPrefix(now) + "XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    return Failure(dir, "write to", errno);
  }
  const fs::path folder = pattern;
  auto discard = [&](auto failure) {
    std::error_code ignored;
    fs::remove_all(folder, ignored);
    return failure;
  };
  if (::chmod(folder.c_str(), static_cast<mode_t>(kFolder)) != 0) {
    return discard(Failure(folder, "set the mode of", errno));
  }
  for (const Entry& entry : EntriesOf(files)) {
    if (auto written = WriteFileAtomic(folder / entry.name, *entry.content, entry.mode); !written) {
      return discard(Fail(written.error()));
    }
  }
  if (auto synced = SyncDirectory(folder); !synced) {
    return discard(Fail(synced.error()));
  }
  return folder;
}

enum class Removal { kRemoved, kNotOurs, kFailed };

// Removes the set folder `name` of the folder open as `dir_fd` if it holds nothing but what
// WriteSetFolder writes, as regular files. Nothing is followed: a link named like a set, or
// one inside it, makes it someone else's. A file added meanwhile makes the final rmdir fail,
// so nothing certctl did not write is ever deleted.
Removal RemoveSetFolder(int dir_fd, const std::string& name) {
  const int set_fd =
      ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (set_fd < 0) {
    return errno == ELOOP || errno == ENOTDIR ? Removal::kNotOurs : Removal::kFailed;
  }
  DIR* listing = ::fdopendir(set_fd);
  if (listing == nullptr) {
    ::close(set_fd);
    return Removal::kFailed;
  }
  std::vector<std::string> files;
  Removal result = Removal::kRemoved;
  while (const dirent* entry = ::readdir(listing)) {
    const std::string_view file = entry->d_name;
    if (file == "." || file == "..") {
      continue;
    }
    struct stat info {};
    if (!IsSetFileName(file) || ::fstatat(set_fd, entry->d_name, &info, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(info.st_mode)) {
      result = Removal::kNotOurs;
      break;
    }
    files.emplace_back(file);
  }
  if (result == Removal::kRemoved) {
    for (const std::string& file : files) {
      ::unlinkat(set_fd, file.c_str(), 0);
    }
  }
  ::closedir(listing);  // closes set_fd too
  if (result == Removal::kRemoved && ::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0) {
    result = errno == ENOTEMPTY || errno == EEXIST ? Removal::kNotOurs : Removal::kFailed;
  }
  return result;
}

// Removes the set folders not named in `keep` and returns the names of those left alone
// because they hold something certctl does not write. A failure here costs disk space, not
// correctness, so it is not an error.
std::vector<std::string> RemoveSetsExcept(const fs::path& dir,
                                          const std::vector<std::string>& keep) {
  std::vector<std::string> old;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    std::string name = entry.path().filename().string();
    if (IsSetFolderName(name) && std::find(keep.begin(), keep.end(), name) == keep.end()) {
      old.push_back(std::move(name));
    }
  }
  std::vector<std::string> not_ours;
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) {
    return not_ours;
  }
  for (const std::string& name : old) {
    if (RemoveSetFolder(dir_fd, name) == Removal::kNotOurs) {
      not_ours.push_back(name);
    }
  }
  ::close(dir_fd);
  std::sort(not_ours.begin(), not_ours.end());
  return not_ours;
}

}  // namespace

Result<std::optional<ServingFiles>> ReadServingFiles(const fs::path& dir) {
  ServingFiles files;
  const std::array<std::pair<const char*, std::string*>, 3> parts = {
      {{kCertFile, &files.tls_crt}, {kKeyFile, &files.tls_key}, {kCaFile, &files.ca_crt}}};
  for (const auto& [name, content] : parts) {
    auto read = ReadFileIfExists(dir / name);
    if (!read) {
      return Fail(read.error());
    }
    if (!*read) {
      return std::optional<ServingFiles>();
    }
    *content = std::move(**read);
  }
  return std::optional<ServingFiles>(std::move(files));
}

Result<Publish> PublishServingFiles(const fs::path& dir, const ServingFiles& files, TimePoint now) {
  if (auto created = CreateDirectories(dir, kFolder); !created) {
    return Fail(created.error());
  }
  auto current = ReadServingFiles(dir);
  if (current && *current && **current == files) {
    return Publish::kUnchanged;
  }

  auto folder = WriteSetFolder(dir, files, now);
  if (!folder) {
    return Fail(folder.error());
  }
  const std::string set_name = folder->filename().string();
  const std::string replaced = LinkTarget(dir / kDataLink).value_or("");
  // Relative links, so the folder reads the same wherever it is mounted.
  if (auto swapped = ReplaceWithLink(dir / kDataLink, set_name, dir / kDataLinkStaging); !swapped) {
    std::error_code ignored;
    fs::remove_all(*folder, ignored);
    return Fail(swapped.error());
  }
  for (const Entry& entry : EntriesOf(files)) {
    const std::string target = std::string(kDataLink) + "/" + entry.name;
    if (LinkTarget(dir / entry.name) == target) {
      continue;
    }
    if (auto linked = ReplaceWithLink(dir / entry.name, target,
                                      dir / ("." + std::string(entry.name) + ".tmp"));
        !linked) {
      return Fail(linked.error());
    }
  }
  if (auto synced = SyncDirectory(dir); !synced) {
    return Fail(synced.error());
  }
  RemoveSetsExcept(dir, {set_name, replaced});
  return Publish::kReplaced;
}

std::vector<std::string> RemoveStaleSets(const fs::path& dir) {
  if (auto current = LinkTarget(dir / kDataLink)) {
    return RemoveSetsExcept(dir, {*current});
  }
  return {};
}

}  // namespace certctl::certdir
