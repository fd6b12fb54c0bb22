#include "server/ephemeral_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace magnetar::server {
namespace {

namespace fs = std::filesystem;

class EphemeralDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "ephemeral-dir-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }
  void TearDown() override { fs::remove_all(root_); }

  // A directory as a dead node would leave it: OWNER present, nobody holding its lock.
  std::string left_dir(const std::string& name) {
    std::string path = root_ + "/" + name;
    fs::create_directory(path);
    std::ofstream(path + "/OWNER") << "1\n";
    std::ofstream(path + "/ports.json") << "{}\n";
    return path;
  }

  // A pid that no process has now: a child that exited and was reaped.
  static pid_t dead_pid() {
    pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    int status = 0;
    ::waitpid(child, &status, 0);
    return child;
  }

  std::string root_;
};

TEST_F(EphemeralDirTest, CreatesAPrivateDirectoryAndRemovesIt) {
  auto dir = EphemeralDir::create(root_);
  ASSERT_TRUE(dir.is_ok()) << dir.status().to_string();
  const std::string path = (*dir)->path();
  const std::string name = fs::path(path).filename().string();
  EXPECT_EQ(name.rfind("magnetar-ephemeral-" + std::to_string(::getpid()) + "-", 0), 0u) << name;
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(fs::exists(path + "/OWNER"));

  std::ofstream(path + "/some-file") << "data";
  fs::create_directories(path + "/storage/segments");
  EXPECT_TRUE((*dir)->remove().is_ok());
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE((*dir)->remove().is_ok());  // idempotent
}

TEST_F(EphemeralDirTest, TwoDirectoriesOfOneProcessDiffer) {
  auto a = EphemeralDir::create(root_);
  auto b = EphemeralDir::create(root_);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_NE((*a)->path(), (*b)->path());
}

TEST_F(EphemeralDirTest, DestructionRemovesTheDirectory) {
  std::string path;
  {
    auto dir = EphemeralDir::create(root_);
    ASSERT_TRUE(dir.is_ok());
    path = (*dir)->path();
    EXPECT_TRUE(fs::exists(path));
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(EphemeralDirTest, CreateFailsWithTheRootInTheMessage) {
  auto dir = EphemeralDir::create(root_ + "/missing");
  ASSERT_FALSE(dir.is_ok());
  EXPECT_NE(dir.status().message().find(root_ + "/missing"), std::string::npos) << dir.status().message();
}

TEST_F(EphemeralDirTest, RemovesOnlyWhatDeadEphemeralNodesLeft) {
  auto live = EphemeralDir::create(root_);
  ASSERT_TRUE(live.is_ok());
  const std::string unlocked = left_dir("magnetar-ephemeral-12345-abcd1234");
  // Died between mkdir and OWNER: the pid decides.
  const std::string no_owner_dead = root_ + "/magnetar-ephemeral-" + std::to_string(dead_pid()) + "-zzzz0000";
  fs::create_directory(no_owner_dead);
  const std::string no_owner_alive = root_ + "/magnetar-ephemeral-" + std::to_string(::getpid()) + "-yyyy0000";
  fs::create_directory(no_owner_alive);
  // Not our pattern, however close: kept.
  std::vector<std::string> kept = {
      left_dir("magnetar-ephemeral-12345-ABCD1234"), left_dir("magnetar-ephemeral-12345-abcd123"),
      left_dir("magnetar-ephemeral-12345-abcd12345"), left_dir("magnetar-ephemeral--abcd1234"),
      left_dir("magnetar-ephemeral-x2345-abcd1234"), left_dir("magnetar-test-12345-abcd1234"),
      left_dir("data")};
  // A file and a symlink with the pattern's name: kept, and what the link points at too.
  const std::string file = root_ + "/magnetar-ephemeral-12346-abcd1234";
  std::ofstream(file) << "not a directory";
  const std::string target = left_dir("somewhere-else");
  const std::string link = root_ + "/magnetar-ephemeral-12347-abcd1234";
  fs::create_directory_symlink(target, link);

  std::vector<std::string> removed = EphemeralDir::remove_stale(root_);
  std::sort(removed.begin(), removed.end());
  std::vector<std::string> expected = {unlocked, no_owner_dead};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(removed, expected);
  EXPECT_FALSE(fs::exists(unlocked));
  EXPECT_FALSE(fs::exists(no_owner_dead));
  EXPECT_TRUE(fs::exists((*live)->path() + "/OWNER"));
  EXPECT_TRUE(fs::exists(no_owner_alive));
  for (const auto& path : kept) EXPECT_TRUE(fs::exists(path + "/ports.json")) << path;
  EXPECT_TRUE(fs::is_regular_file(file));
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(fs::exists(target + "/ports.json"));
}

TEST_F(EphemeralDirTest, ALiveDirectoryOfAnotherProcessIsKept) {
  // The child holds its directory's lock until told to go; the parent's
  // sweep must leave it, and remove it once the child is gone.
  int go[2];
  int made[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(made), 0);
  pid_t child = ::fork();
  if (child == 0) {
    auto dir = EphemeralDir::create(root_);
    std::string path = dir.is_ok() ? (*dir)->path() : "";
    (void)!::write(made[1], path.data(), path.size());
    ::close(made[1]);
    char c;
    (void)!::read(go[0], &c, 1);
    ::_exit(0);  // no destructor: the directory stays, as after kill -9
  }
  ::close(made[1]);
  char buf[512];
  ssize_t n = ::read(made[0], buf, sizeof(buf));
  ASSERT_GT(n, 0);
  std::string path(buf, static_cast<size_t>(n));
  EXPECT_TRUE(EphemeralDir::remove_stale(root_).empty());
  EXPECT_TRUE(fs::exists(path));
  ASSERT_EQ(::write(go[1], "x", 1), 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_EQ(EphemeralDir::remove_stale(root_), std::vector<std::string>{path});
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace magnetar::server
