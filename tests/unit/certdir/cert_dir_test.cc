#include "certctl/certdir/cert_dir.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certctl/util/file.h"

#include "support/temp_dir.h"
#include <sys/stat.h>

namespace certctl::certdir {
namespace cert_dir_test {
namespace {

namespace fs = std::filesystem;
using certctl::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const TimePoint kNow =
    std::chrono::sys_days{std::chrono::year{2026} / 1 / 31} + std::chrono::hours(12);

ServingFiles Set(const std::string& tag) {
  return {"certificate " + tag, "key " + tag, "ca " + tag};
}

unsigned Mode(const fs::path& path) {
  struct stat info {};
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return info.st_mode & 0777;
}

std::vector<std::string> Entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(CertDir, APublishedSetIsThreeRelativeLinksIntoData) {
  TempDir dir;
  const fs::path certs = dir / "tls";
  ASSERT_EQ(PublishServingFiles(certs, Set("a"), kNow).value(), Publish::kReplaced);

  EXPECT_EQ(ReadServingFiles(certs).value(), Set("a"));
  for (const char* name : {"tls.crt", "tls.key", "ca.crt"}) {
    ASSERT_TRUE(fs::is_symlink(certs / name)) << name;
    EXPECT_EQ(fs::read_symlink(certs / name), fs::path("..data") / name);
  }
  const fs::path set = fs::read_symlink(certs / "..data");
  EXPECT_THAT(set.string(), StartsWith("..2026_01_31_12_00_00."));
  EXPECT_TRUE(set.is_relative());
  EXPECT_EQ(Mode(certs), 0755u);
  EXPECT_EQ(Mode(certs / set), 0755u);
  EXPECT_EQ(Mode(certs / "tls.key"), 0600u);
  EXPECT_EQ(Mode(certs / "tls.crt"), 0644u);
  EXPECT_EQ(Mode(certs / "ca.crt"), 0644u);
  EXPECT_EQ(Entries(certs),
            (std::vector<std::string>{set.string(), "..data", "ca.crt", "tls.crt", "tls.key"}));
}

TEST(CertDir, TheSameSetIsNotWrittenAgain) {
  TempDir dir;
  ASSERT_TRUE(PublishServingFiles(dir.path(), Set("a"), kNow));
  const fs::path set = fs::read_symlink(dir / "..data");
  EXPECT_EQ(PublishServingFiles(dir.path(), Set("a"), kNow + std::chrono::hours(1)).value(),
            Publish::kUnchanged);
  EXPECT_EQ(fs::read_symlink(dir / "..data"), set);
}

TEST(CertDir, ANewSetReplacesTheOldOneWhole) {
  TempDir dir;
  ASSERT_TRUE(PublishServingFiles(dir.path(), Set("a"), kNow));
  const fs::path old_set = fs::read_symlink(dir / "..data");
  ServingFiles changed = Set("a");
  changed.ca_crt = "ca b";  // any one file differing replaces the set
  ASSERT_EQ(PublishServingFiles(dir.path(), changed, kNow + std::chrono::seconds(1)).value(),
            Publish::kReplaced);
  EXPECT_EQ(ReadServingFiles(dir.path()).value(), changed);
  EXPECT_NE(fs::read_symlink(dir / "..data"), old_set);
  // The replaced set stays for readers that followed ..data just before the swap, until
  // RemoveStaleSets; a third set removes it anyway.
  EXPECT_TRUE(fs::exists(dir.path() / old_set));
  RemoveStaleSets(dir.path());
  EXPECT_FALSE(fs::exists(dir.path() / old_set));
  EXPECT_EQ(Entries(dir.path()).size(), 5U);
  EXPECT_EQ(ReadServingFiles(dir.path()).value(), changed);

  const fs::path second_set = fs::read_symlink(dir / "..data");
  ASSERT_TRUE(PublishServingFiles(dir.path(), Set("c"), kNow + std::chrono::seconds(2)));
  ASSERT_TRUE(PublishServingFiles(dir.path(), Set("d"), kNow + std::chrono::seconds(3)));
  EXPECT_FALSE(fs::exists(dir.path() / second_set));
  EXPECT_EQ(Entries(dir.path()).size(), 6U);  // ..data, d's set, c's set, three links
}

TEST(CertDir, PlainFilesFromAnEarlierWriterBecomeLinks) {
  // `certctl generate --out-dir` writes plain files; run takes the folder over.
  TempDir dir;
  ASSERT_TRUE(WriteFileAtomic(dir / "tls.crt", "old", fs::perms::owner_read));
  ASSERT_TRUE(PublishServingFiles(dir.path(), Set("a"), kNow));
  EXPECT_TRUE(fs::is_symlink(dir / "tls.crt"));
  EXPECT_EQ(ReadServingFiles(dir.path()).value(), Set("a"));
}

TEST(CertDir, LeftoversOfAnInterruptedRunAreCleanedUp) {
  TempDir dir;
  fs::create_directory(dir / "..2025_12_01_00_00_00.abcdef");
  dir.Write("..2025_12_01_00_00_00.abcdef/tls.key", "half");
  fs::create_symlink("..2025_12_01_00_00_00.abcdef", dir / "..data_tmp");
  dir.Write("..my-notes", "kept: not ours");
  ASSERT_TRUE(PublishServingFiles(dir.path(), Set("a"), kNow));
  EXPECT_FALSE(fs::exists(dir / "..2025_12_01_00_00_00.abcdef"));
  EXPECT_FALSE(fs::is_symlink(dir / "..data_tmp"));
  EXPECT_TRUE(fs::exists(dir / "..my-notes"));
}

TEST(CertDir, AnInterruptedWriteLeavesATemporaryThatIsCleanedUpToo) {
  TempDir dir;
  dir.Write("..2025_12_01_00_00_00.AbC123/.tls.key.tmp-0a1b2c3d", "half");
  fs::create_directory(dir / "..2025_12_01_00_00_01.abcdef");  // crashed before any file
  ASSERT_TRUE(PublishServingFiles(dir.path(), Set("a"), kNow));
  EXPECT_FALSE(fs::exists(dir / "..2025_12_01_00_00_00.AbC123"));
  EXPECT_FALSE(fs::exists(dir / "..2025_12_01_00_00_01.abcdef"));
}

TEST(CertDir, FoldersThatOnlyLookLikeSetsAreLeftAlone) {
  TempDir dir;
  // Not named as certctl names a set.
  dir.Write("..1_user_folder/notes", "mine");
  dir.Write("..2025_12_01_00_00_00.abcdef.old/tls.crt", "mine");
  dir.Write("..2025_12_01_00_00_00/tls.crt", "mine");
  dir.Write("..2025-12-01_00_00_00.abcdef/tls.crt", "mine");
  // Named like a set, holding what certctl does not write there.
  dir.Write("..2025_12_01_00_00_00.aaaaaa/notes", "mine");
  dir.Write("..2025_12_01_00_00_00.bbbbbb/tls.crt", "mine");
  dir.Write("..2025_12_01_00_00_00.bbbbbb/extra/tls.key", "mine");
  dir.Write("elsewhere/tls.crt", "mine");
  fs::create_directory(dir / "..2025_12_01_00_00_00.cccccc");
  fs::create_symlink("../elsewhere/tls.crt", dir / "..2025_12_01_00_00_00.cccccc/tls.crt");
  fs::create_directory_symlink("elsewhere", dir / "..2025_12_01_00_00_00.dddddd");
  const std::vector<std::string> user_entries = Entries(dir.path());

  ASSERT_TRUE(PublishServingFiles(dir.path(), Set("a"), kNow));
  ASSERT_TRUE(PublishServingFiles(dir.path(), Set("b"), kNow + std::chrono::seconds(1)));
  const std::vector<std::string> left = RemoveStaleSets(dir.path());

  EXPECT_EQ(left, (std::vector<std::string>{
                      "..2025_12_01_00_00_00.aaaaaa", "..2025_12_01_00_00_00.bbbbbb",
                      "..2025_12_01_00_00_00.cccccc", "..2025_12_01_00_00_00.dddddd"}));
  for (const std::string& name : user_entries) {
    EXPECT_TRUE(fs::exists(fs::symlink_status(dir / name))) << name;
  }
  EXPECT_EQ(dir.Read("..1_user_folder/notes"), "mine");
  EXPECT_EQ(dir.Read("..2025_12_01_00_00_00.bbbbbb/tls.crt"), "mine");
  EXPECT_EQ(dir.Read("..2025_12_01_00_00_00.bbbbbb/extra/tls.key"), "mine");
  EXPECT_EQ(dir.Read("elsewhere/tls.crt"), "mine");
  // Beside them only the current set: the links, ..data and its folder.
  EXPECT_EQ(Entries(dir.path()).size(), user_entries.size() + 5);
  EXPECT_EQ(ReadServingFiles(dir.path()).value(), Set("b"));
}

TEST(CertDir, MissingFilesReadAsNoSet) {
  TempDir dir;
  EXPECT_EQ(ReadServingFiles(dir.path()).value(), std::nullopt);
  dir.Write("tls.crt", "c");
  dir.Write("tls.key", "k");
  EXPECT_EQ(ReadServingFiles(dir.path()).value(), std::nullopt);
}

TEST(CertDir, AnUnwritableFolderIsAnErrorNamingThePathAndChangesNothing) {
  TempDir dir;
  dir.Write("file", "not a folder");
  const auto blocked = PublishServingFiles(dir / "file/tls", Set("a"), kNow);
  ASSERT_FALSE(blocked);
  EXPECT_EQ(blocked.error().code(), ErrorCode::kIo);
  EXPECT_THAT(blocked.error().message(), HasSubstr((dir / "file").string()));
  EXPECT_EQ(dir.Read("file"), "not a folder");
}

TEST(CertDir, ReadersAlwaysSeeWholeFiles) {
  // A reader racing the swaps opens DIR/tls.crt by name, like a server reloading it. The
  // replaced set is kept until the next swap, so a read may overlap one swap and still find
  // its files; the publisher waits, between swaps, for a read that began after the last one,
  // so that no read spans two (which only a reader stalled for a whole swap would do).
  TempDir dir;
  const std::string big_a(64 * 1024, 'a');
  const std::string big_b(64 * 1024, 'b');
  const ServingFiles a{big_a, "key a", "ca a"};
  const ServingFiles b{big_b, "key b", "ca b"};
  ASSERT_TRUE(PublishServingFiles(dir.path(), a, kNow));
  std::atomic<bool> done{false};
  std::atomic<int> published{0};
  std::atomic<int> read_since{0};  // the latest swap count a completed read began after
  std::atomic<int> torn{0};
  std::atomic<int> reads{0};
  std::thread reader([&] {
    while (!done) {
      const int began_after = published.load();
      auto content = ReadFile(dir / "tls.crt");
      if (!content || (*content != big_a && *content != big_b)) {
        ++torn;  // missing for a moment, or a mix
      }
      ++reads;
      read_since = began_after;
    }
  });
  for (int round = 1; round <= 200; ++round) {
    ASSERT_TRUE(PublishServingFiles(dir.path(), round % 2 == 1 ? b : a, kNow));
    published = round;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (read_since.load() < round && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::yield();
    }
  }
  done = true;
  reader.join();
  EXPECT_EQ(torn, 0);
  EXPECT_GE(reads, 200);
  RemoveStaleSets(dir.path());
  EXPECT_EQ(Entries(dir.path()).size(), 5U);
}

}  // namespace
}  // namespace cert_dir_test
}  // namespace certctl::certdir
