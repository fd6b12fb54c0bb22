#include "server/ephemeral_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <random>

#include <fmt/format.h>

namespace magnetar::server {

using common::Result;
using common::Status;

namespace {

constexpr size_t kRandomChars = 8;
constexpr std::string_view kRandomAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789";

// The pid in `name` when it is exactly <kPrefix><pid>-<kRandomChars of the
// alphabet>; 0 otherwise.
pid_t pid_of_ephemeral_name(std::string_view name) {
  if (name.substr(0, EphemeralDir::kPrefix.size()) != EphemeralDir::kPrefix) return 0;
  name.remove_prefix(EphemeralDir::kPrefix.size());
  size_t dash = name.find('-');
  if (dash == 0 || dash == std::string_view::npos || dash > 10) return 0;
  long long pid = 0;
  for (char c : name.substr(0, dash)) {
    if (c < '0' || c > '9') return 0;
    pid = pid * 10 + (c - '0');
  }
  std::string_view suffix = name.substr(dash + 1);
  if (suffix.size() != kRandomChars) return 0;
  for (char c : suffix) {
    if (kRandomAlphabet.find(c) == std::string_view::npos) return 0;
  }
  return pid > 0 && pid <= INT32_MAX ? static_cast<pid_t>(pid) : 0;
}

bool process_exists(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

// Whether the directory `path` (named for `pid`) was left by a process that
// is gone. OWNER's flock is the answer when OWNER exists; without it (its
// creator died between mkdir and OWNER, or is there now) the pid is.
bool left_behind(const std::string& path, pid_t pid) {
  std::string owner = path + "/" + std::string(EphemeralDir::kOwnerFile);
  int fd = ::open(owner.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT && !process_exists(pid);
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);  // releases the lock again
  return free;
}

std::string random_suffix() {
  std::random_device device;
  std::uniform_int_distribution<size_t> pick(0, kRandomAlphabet.size() - 1);
  std::string out;
  for (size_t i = 0; i < kRandomChars; i++) out.push_back(kRandomAlphabet[pick(device)]);
  return out;
}

}  // namespace

std::string EphemeralDir::temp_root() {
  const char* tmp = std::getenv("TMPDIR");
  if (tmp != nullptr && tmp[0] == '/') return tmp;
  return "/tmp";
}

Result<std::unique_ptr<EphemeralDir>> EphemeralDir::create(const std::string& root) {
  std::string path;
  for (int attempt = 0;; attempt++) {
    path = fmt::format("{}/{}{}-{}", root, kPrefix, ::getpid(), random_suffix());
    if (::mkdir(path.c_str(), 0700) == 0) break;
    if (errno != EEXIST || attempt == 10) {
      return Status::from_errno(errno, "cannot create an ephemeral directory under " + root);
    }
  }
  std::string owner = path + "/" + std::string(kOwnerFile);
  std::string pid = fmt::format("{}\n", ::getpid());
  int fd = ::open(owner.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0 ||
      ::write(fd, pid.data(), pid.size()) != static_cast<ssize_t>(pid.size())) {
    Status st = Status::from_errno(errno, "cannot write " + owner);
    if (fd >= 0) ::close(fd);
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    return st;
  }
  return std::unique_ptr<EphemeralDir>(new EphemeralDir(std::move(path), fd));
}

std::vector<std::string> EphemeralDir::remove_stale(const std::string& root) {
  std::vector<std::string> removed;
  DIR* dir = ::opendir(root.c_str());
  if (dir == nullptr) return removed;
  std::vector<std::pair<std::string, pid_t>> candidates;
  while (struct dirent* entry = ::readdir(dir)) {
    pid_t pid = pid_of_ephemeral_name(entry->d_name);
    if (pid != 0) candidates.emplace_back(entry->d_name, pid);
  }
  ::closedir(dir);
  const uid_t me = ::geteuid();
  for (const auto& [name, pid] : candidates) {
    std::string path = root + "/" + name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != me) continue;
    if (!left_behind(path, pid)) continue;
    std::error_code ec;
    std::filesystem::remove_all(path, ec);  // removes symlinks inside, never what they point to
    if (!ec) removed.push_back(std::move(path));
  }
  return removed;
}

EphemeralDir::~EphemeralDir() { (void)remove(); }

Status EphemeralDir::remove() {
  if (owner_fd_ < 0) return Status::ok();
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  ::close(owner_fd_);
  owner_fd_ = -1;
  if (ec) return Status::io_error(fmt::format("cannot remove {}: {}", path_, ec.message()));
  return Status::ok();
}

}  // namespace magnetar::server
