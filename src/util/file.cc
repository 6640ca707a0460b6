#include "certctl/util/file.h"

#include <cerrno>
#include <cstring>

#include "certctl/util/random.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace certctl {
namespace {

std::string SystemReason(int error_number) { return std::strerror(error_number); }

// Closes the descriptor on every path out of a function.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  int get() const { return fd_; }
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

}  // namespace

Result<std::string> ReadFile(const std::filesystem::path& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    const int error_number = errno;
    return Fail(error_number == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                "cannot read " + path.string() + ": " + SystemReason(error_number));
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) == 0 && S_ISDIR(info.st_mode)) {
    return Fail(ErrorCode::kIo, "cannot read " + path.string() + ": is a directory");
  }
  std::string content;
  char buffer[16384];
  while (true) {
    const ssize_t count = ::read(fd.get(), buffer, sizeof(buffer));
    if (count < 0) {
      if (errno == EINTR) {
        continue;
      }
      return Fail(ErrorCode::kIo, "cannot read " + path.string() + ": " + SystemReason(errno));
    }
    if (count == 0) {
      break;
    }
    content.append(buffer, static_cast<std::size_t>(count));
  }
  return content;
}

Result<std::optional<std::string>> ReadFileIfExists(const std::filesystem::path& path) {
  auto content = ReadFile(path);
  if (!content) {
    if (content.error().code() == ErrorCode::kNotFound) {
      return std::optional<std::string>();
    }
    return Fail(content.error());
  }
  return std::optional<std::string>(std::move(*content));
}

Status WriteFileAtomic(const std::filesystem::path& path, std::string_view content,
                       std::filesystem::perms mode) {
  const std::filesystem::path temporary =
      path.parent_path() / ("." + path.filename().string() + ".tmp-" + RandomSuffix());
  // Created with the final mode so key material is never world-readable, not even briefly.
  FileDescriptor fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                           static_cast<mode_t>(mode)));
  if (fd.get() < 0) {
    return Fail(ErrorCode::kIo, "cannot write " + path.string() + ": " + SystemReason(errno));
  }
  auto fail = [&](const char* step) {
    const int error_number = errno;
    ::unlink(temporary.c_str());
    return Fail(ErrorCode::kIo,
                "cannot write " + path.string() + " (" + step + "): " + SystemReason(error_number));
  };
  std::size_t written = 0;
  while (written < content.size()) {
    const ssize_t count = ::write(fd.get(), content.data() + written, content.size() - written);
    if (count < 0) {
      if (errno == EINTR) {
        continue;
      }
      return fail("write");
    }
    written += static_cast<std::size_t>(count);
  }
  // The umask may have narrowed the mode given to open(); set it exactly.
  if (::fchmod(fd.get(), static_cast<mode_t>(mode)) != 0) {
    return fail("chmod");
  }
  if (::fsync(fd.get()) != 0) {
    return fail("fsync");
  }
  if (::close(fd.Release()) != 0) {
    return fail("close");
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    return fail("rename");
  }
  return {};
}

Status CreateDirectories(const std::filesystem::path& dir, std::filesystem::perms mode) {
  std::error_code error;
  const std::filesystem::path target = dir.lexically_normal();
  std::filesystem::path current;
  for (const auto& part : target) {
    current /= part;
    if (part.empty() || part == "/" || part == "." || part == "..") {
      continue;
    }
    if (::mkdir(current.c_str(), static_cast<mode_t>(mode)) == 0) {
      // mkdir applied the umask; a folder created here gets the mode asked for.
      if (::chmod(current.c_str(), static_cast<mode_t>(mode)) != 0) {
        return Fail(ErrorCode::kIo,
                    "cannot set the mode of " + current.string() + ": " + SystemReason(errno));
      }
      continue;
    }
    const int error_number = errno;
    if (error_number != EEXIST) {
      return Fail(ErrorCode::kIo,
                  "cannot create " + current.string() + ": " + SystemReason(error_number));
    }
    if (!std::filesystem::is_directory(current, error)) {
      return Fail(ErrorCode::kIo, "cannot create " + target.string() + ": " + current.string() +
                                      " exists and is not a folder");
    }
  }
  return {};
}

Status SyncDirectory(const std::filesystem::path& dir) {
  FileDescriptor fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0 || ::fsync(fd.get()) != 0) {
    return Fail(ErrorCode::kIo, "cannot sync folder " + dir.string() + ": " + SystemReason(errno));
  }
  return {};
}

}  // namespace certctl
