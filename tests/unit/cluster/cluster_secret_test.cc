// ClusterSecret: the secret file's rules (made by create_file, refused when loose or malformed) and the MAC.
#include "cluster/cluster_secret.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace magnetar::cluster {
namespace {

using common::ErrorCode;

class ClusterSecretTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/magnetar-secret-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes `text` to a file in the test directory with `mode`.
  std::string write_file(const std::string& name, const std::string& text, mode_t mode = 0600) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);
    return path;
  }

  std::string dir_;
};

TEST_F(ClusterSecretTest, CreatedFileLoadsWithOwnerOnlyMode) {
  std::string path = dir_ + "/cluster.secret";
  ASSERT_TRUE(ClusterSecret::create_file(path).is_ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line.size(), 64u);

  auto a = ClusterSecret::load(path);
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  auto b = ClusterSecret::load(path);
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(a->mac("hello").size(), 32u);
  EXPECT_EQ(a->mac("hello"), b->mac("hello"));
  EXPECT_NE(a->mac("hello"), a->mac("hellp"));
}

TEST_F(ClusterSecretTest, CreateRefusesAnExistingFile) {
  std::string path = dir_ + "/cluster.secret";
  ASSERT_TRUE(ClusterSecret::create_file(path).is_ok());
  std::string before = ClusterSecret::load(path)->mac("x");
  EXPECT_EQ(ClusterSecret::create_file(path).code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(ClusterSecret::load(path)->mac("x"), before);
}

TEST_F(ClusterSecretTest, TwoCreatedSecretsDiffer) {
  ASSERT_TRUE(ClusterSecret::create_file(dir_ + "/a").is_ok());
  ASSERT_TRUE(ClusterSecret::create_file(dir_ + "/b").is_ok());
  EXPECT_NE(ClusterSecret::load(dir_ + "/a")->mac("x"), ClusterSecret::load(dir_ + "/b")->mac("x"));
}

TEST_F(ClusterSecretTest, LoadTrimsWhitespaceAndMatchesTheBytes) {
  std::string hex(64, 'a');  // 32 bytes of 0xaa
  std::string path = write_file("s", "  \n" + hex + " \r\n\n");
  auto loaded = ClusterSecret::load(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EXPECT_EQ(loaded->mac("data"), ClusterSecret::from_bytes(std::string(32, '\xaa')).mac("data"));
}

TEST_F(ClusterSecretTest, LoadRefusesWhatIsNotASecret) {
  auto refused = [](const std::string& path, const std::string& says) {
    auto loaded = ClusterSecret::load(path);
    ASSERT_FALSE(loaded.is_ok()) << path;
    EXPECT_EQ(loaded.status().code(), ErrorCode::kInvalidArgument) << path;
    EXPECT_NE(loaded.status().message().find(says), std::string::npos) << loaded.status().to_string();
  };
  refused(dir_ + "/missing", "does not exist");
  refused(write_file("short", std::string(62, 'a') + "\n"), "too short");
  refused(write_file("odd", std::string(65, 'a')), "not hex");
  refused(write_file("nothex", std::string(62, 'a') + "zz"), "not hex");
  refused(write_file("empty", "\n"), "too short");
  refused(write_file("loose", std::string(64, 'a'), 0640), "chmod 600");
  refused(write_file("open", std::string(64, 'a'), 0604), "chmod 600");
  refused(dir_, "not a regular file");
}

}  // namespace
}  // namespace magnetar::cluster
