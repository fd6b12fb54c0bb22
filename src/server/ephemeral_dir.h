// EphemeralDir: the private data directory of an ephemeral node
// (`magnetar start --ephemeral`), under the system's temporary directory,
// removed when the node stops.
//
// Layout: <root>/magnetar-ephemeral-<pid>-<8 random [a-z0-9]>/, mode 0700,
// holding OWNER (the creating pid, flock'ed for the life of the process)
// beside the node's own files.
//
// A process killed with SIGKILL cannot remove its directory; the kernel
// drops its flock though, so the next ephemeral start (remove_stale) can tell
// a left-over directory from a live one without trusting pids alone.
//
// Threads: main thread only.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/status.h"

namespace magnetar::server {

class EphemeralDir {
 public:
  static constexpr std::string_view kPrefix = "magnetar-ephemeral-";
  static constexpr std::string_view kOwnerFile = "OWNER";

  // $TMPDIR when it is set to an absolute path, else /tmp.
  static std::string temp_root();

  // Creates a new directory under `root` (which must exist) and takes its
  // OWNER lock. IoError naming the path when it cannot.
  static common::Result<std::unique_ptr<EphemeralDir>> create(const std::string& root);

  // Removes, under `root`, every directory that an ephemeral node left
  // behind: its name has exactly the pattern above, it is a directory (not a
  // symlink) owned by this user, and either its OWNER lock is free or it has
  // no OWNER and the pid in its name is not running. Nothing else is
  // touched. Returns the paths removed; failures to remove are skipped.
  static std::vector<std::string> remove_stale(const std::string& root);

  // Removes the directory unless remove() already did.
  ~EphemeralDir();
  EphemeralDir(const EphemeralDir&) = delete;
  EphemeralDir& operator=(const EphemeralDir&) = delete;

  const std::string& path() const { return path_; }

  // Removes the directory and everything in it, then releases the lock.
  // Idempotent; IoError when something could not be removed.
  common::Status remove();

 private:
  EphemeralDir(std::string path, int owner_fd) : path_(std::move(path)), owner_fd_(owner_fd) {}

  std::string path_;
  int owner_fd_ = -1;  // OWNER, flock'ed; -1 once removed
};

}  // namespace magnetar::server
