#include "cli/pair_files.h"

#include <system_error>
#include <vector>

#include "certctl/util/file.h"

namespace certctl::cli {
namespace fs = std::filesystem;

Result<pki::PairSource> ReadPairFromDir(const fs::path& dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) {
    // Something else at the path is a different mistake than nothing there.
    return fs::exists(dir, error) ? Fail(ErrorCode::kInvalidArgument,
                                         "certificate folder " + dir.string() + " is not a folder")
                                  : Fail(ErrorCode::kNotFound,
                                         "certificate folder " + dir.string() + " does not exist");
  }
  pki::PairSource source;
  struct Part {
    const char* name;
    std::optional<std::string>* content;
    std::string* label;
  };
  const Part parts[] = {
      {kCaCertFile, &source.ca_pem, &source.ca_label},
      {kCertFile, &source.cert_pem, &source.cert_label},
      {kKeyFile, &source.key_pem, &source.key_label},
      {kCaKeyFile, &source.ca_key_pem, &source.ca_key_label},
  };
  for (const Part& part : parts) {
    const fs::path path = dir / part.name;
    auto content = ReadFileIfExists(path);
    if (!content) {
      return Fail(content.error());
    }
    *part.content = std::move(*content);
    *part.label = path.string();
  }
  return source;
}

Result<pki::PairSource> ReadPairFromFiles(const fs::path& cert, const fs::path& key,
                                          const fs::path& ca) {
  pki::PairSource source;
  auto cert_pem = ReadFile(cert);
  if (!cert_pem) {
    return Fail(cert_pem.error());
  }
  auto key_pem = ReadFile(key);
  if (!key_pem) {
    return Fail(key_pem.error());
  }
  auto ca_pem = ReadFile(ca);
  if (!ca_pem) {
    return Fail(ca_pem.error());
  }
  source.cert_pem = std::move(*cert_pem);
  source.key_pem = std::move(*key_pem);
  source.ca_pem = std::move(*ca_pem);
  source.cert_label = cert.string();
  source.key_label = key.string();
  source.ca_label = ca.string();
  return source;
}

Status WritePairToDir(const fs::path& dir, const PairFiles& files, Overwrite overwrite) {
  constexpr fs::perms kPublic = fs::perms::owner_read | fs::perms::owner_write |
                                fs::perms::group_read | fs::perms::others_read;
  constexpr fs::perms kPrivate = fs::perms::owner_read | fs::perms::owner_write;
  struct Entry {
    const char* name;
    const std::string* content;
    fs::perms mode;
  };
  std::vector<Entry> entries = {
      {kCaCertFile, &files.ca_crt, kPublic},
      {kCertFile, &files.tls_crt, kPublic},
      {kKeyFile, &files.tls_key, kPrivate},
  };
  if (!files.ca_key.empty()) {
    entries.push_back({kCaKeyFile, &files.ca_key, kPrivate});
  }

  // Readable by the server that uses the pair; the key files themselves stay 0600.
  constexpr fs::perms kFolder = fs::perms::owner_all | fs::perms::group_read |
                                fs::perms::group_exec | fs::perms::others_read |
                                fs::perms::others_exec;
  if (auto created = CreateDirectories(dir, kFolder); !created) {
    return created;
  }
  if (overwrite == Overwrite::kRefuse) {
    std::error_code error;
    for (const Entry& entry : entries) {
      // symlink_status: a link is an existing file even when it points nowhere.
      if (fs::exists(fs::symlink_status(dir / entry.name, error))) {
        return Fail(ErrorCode::kFailedPrecondition,
                    (dir / entry.name).string() + " already exists (use --force to replace it)");
      }
    }
  }
  // Keys first: a crash midway leaves an unmatched key, never a certificate without one.
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    auto written = WriteFileAtomic(dir / it->name, *it->content, it->mode);
    if (!written) {
      return written;
    }
  }
  return SyncDirectory(dir);
}

}  // namespace certctl::cli
