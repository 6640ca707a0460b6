#include "certctl/util/file.h"

#include <gtest/gtest.h>

#include "support/temp_dir.h"
#include <sys/stat.h>

namespace certctl {
namespace file_test {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

TEST(WriteFileAtomic, WritesContentWithExactMode) {
  TempDir dir;
  const fs::path file = dir / "tls.key";
  ASSERT_TRUE(WriteFileAtomic(file, "secret", fs::perms::owner_read | fs::perms::owner_write));
  EXPECT_EQ(ReadFile(file).value(), "secret");
  struct stat info {};
  ASSERT_EQ(::stat(file.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
}

TEST(WriteFileAtomic, ReplacesExistingFileAndLeavesNoTemporaries) {
  TempDir dir;
  const fs::path file = dir.Write("tls.crt", "old");
  ASSERT_TRUE(WriteFileAtomic(file, "new", fs::perms(0644)));
  EXPECT_EQ(ReadFile(file).value(), "new");
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path())) {
    ++entries;
  }
  EXPECT_EQ(entries, 1);
}

TEST(WriteFileAtomic, FailsWithPathWhenFolderIsMissing) {
  TempDir dir;
  auto written = WriteFileAtomic(dir / "missing" / "tls.crt", "x", fs::perms(0644));
  ASSERT_FALSE(written.has_value());
  EXPECT_EQ(written.error().code(), ErrorCode::kIo);
  EXPECT_NE(written.error().message().find("missing/tls.crt"), std::string::npos);
}

TEST(ReadFile, TellsMissingFromUnreadable) {
  TempDir dir;
  auto missing = ReadFile(dir / "nope");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message().find("nope"), std::string::npos);

  auto folder = ReadFile(dir.path());
  ASSERT_FALSE(folder.has_value());
  EXPECT_EQ(folder.error().code(), ErrorCode::kIo);

  auto optional = ReadFileIfExists(dir / "nope");
  ASSERT_TRUE(optional.has_value());
  EXPECT_FALSE(optional->has_value());
}

TEST(CreateDirectories, CreatesMissingParentsWithTheModeAskedFor) {
  TempDir dir;
  const mode_t previous = ::umask(0077);
  const auto created = CreateDirectories(
      dir / "a/b/./c", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  ::umask(previous);
  ASSERT_TRUE(created) << created.error().message();
  for (const char* folder : {"a", "a/b", "a/b/c"}) {
    struct stat info {};
    ASSERT_EQ(::stat((dir / folder).c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0750u) << folder;
  }
  EXPECT_TRUE(CreateDirectories(dir / "a/b/c", fs::perms::owner_all));  // exists: fine
}

TEST(SyncDirectory, AMissingFolderIsAnIoError) {
  TempDir dir;
  EXPECT_TRUE(SyncDirectory(dir.path()));
  auto missing = SyncDirectory(dir / "nope");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), ErrorCode::kIo);
  EXPECT_NE(missing.error().message().find("nope"), std::string::npos);
}

}  // namespace
}  // namespace file_test
}  // namespace certctl
