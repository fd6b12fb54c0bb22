// FaultyFileOps: the real file system calls, with faults a test arms: EIO or
// ENOSPC on writes, short writes, failed or slow fdatasyncs, failed opens,
// reads and unlinks, and a power loss (now, or during a chosen fdatasync)
// that throws away every byte no good fdatasync covered.
//
// The power-loss model follows Linux: a failed fdatasync reports the error
// once and the pages it could not write are gone; a later fdatasync
// succeeds but does not bring them back. Segment files are append-only (or
// cut back), so "what survives" is tracked per file as the size the last
// good sync covered plus the stretches a failed sync lost after it.
//
// Faults apply to files whose path contains `match` (".seg" by default).
// Thread-safe: storage calls it from several threads at once. Writes and
// syncs of matching files run one at a time under the lock a power loss
// takes, so the power goes between two of them, never inside one: a sync
// that reports success covered bytes that are still there.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "storage/file_ops.h"

namespace magnetar::storage::testing {

class FaultyFileOps final : public FileOps {
 public:
  explicit FaultyFileOps(std::string match = ".seg") : match_(std::move(match)) {}

  // The next `count` writes (-1: every one) fail with `err` and write nothing.
  void fail_writes(int err, int count = -1) { arm(write_fault_, err, count); }
  // Each write writes at most `bytes` bytes (0: no limit).
  void short_writes(size_t bytes) {
    std::lock_guard lock(mu_);
    short_write_bytes_ = bytes;
  }
  // The next `count` fdatasyncs fail with `err`, losing what they covered.
  void fail_syncs(int err, int count = 1) { arm(sync_fault_, err, count); }
  // Every fdatasync takes at least this long first (to let writes pile up).
  void delay_syncs(std::chrono::milliseconds d) {
    std::lock_guard lock(mu_);
    sync_delay_ = d;
  }
  // The next `count` opens that create a file fail with `err`.
  void fail_creates(int err, int count = -1) { arm(create_fault_, err, count); }
  // The next `count` reads fail with `err`.
  void fail_reads(int err, int count = -1) { arm(read_fault_, err, count); }
  // The next `count` unlinks of matching files fail with `err` and remove nothing.
  void fail_unlinks(int err, int count = -1) { arm(unlink_fault_, err, count); }
  // The power goes out during the n-th fdatasync of a matching file from now
  // (n >= 1): that sync fails and crash() happens in it.
  void crash_at_sync(int n) {
    std::lock_guard lock(mu_);
    crash_countdown_ = n;
  }
  bool crashed() const { return is_dead(); }
  void clear_faults() {
    std::lock_guard lock(mu_);
    write_fault_ = sync_fault_ = create_fault_ = read_fault_ = unlink_fault_ = Fault{};
    crash_countdown_ = 0;
    short_write_bytes_ = 0;
    sync_delay_ = {};
    dead_ = false;
  }

  // The power goes out: every file is cut back to what its last good sync
  // covered, and stretches a failed sync lost read as zeros. REQUIRES: no
  // storage has the files open (stop it first, or let the process act as if
  // it had died: the descriptors stay valid but the data is gone).
  void power_loss() {
    std::lock_guard lock(mu_);
    power_loss_locked();
  }

  // The process dies with the power: a power loss, and from now on every
  // write, sync and cut of a segment fails (nothing a dying process does
  // reaches the disk) until clear_faults(), which starts the next process.
  void crash() {
    std::lock_guard lock(mu_);
    power_loss_locked();
    dead_ = true;
  }

  int syncs_failed() const {
    std::lock_guard lock(mu_);
    return syncs_failed_;
  }
  // fdatasyncs of matching files that succeeded.
  int syncs() const {
    std::lock_guard lock(mu_);
    return syncs_;
  }

  // ---- FileOps
  int open(const std::string& path, int flags, mode_t mode) override {
    const bool tracked = path.find(match_) != std::string::npos;
    if (tracked && (flags & O_CREAT) != 0) {
      if (int err = take(create_fault_); err != 0) {
        errno = err;
        return -1;
      }
    }
    int fd = ::open(path.c_str(), flags, mode);
    if (fd >= 0 && tracked) {
      std::lock_guard lock(mu_);
      fds_[fd] = path;
      auto [it, fresh] = files_.try_emplace(path);
      if (fresh || (flags & O_CREAT) != 0) {
        struct stat sb {};
        ::fstat(fd, &sb);
        // A file that existed before is taken as durable as it stands.
        it->second = File{static_cast<uint64_t>(sb.st_size), {}, static_cast<uint64_t>(sb.st_size)};
      }
    }
    return fd;
  }
  int close(int fd) override {
    {
      std::lock_guard lock(mu_);
      fds_.erase(fd);
    }
    return ::close(fd);
  }
  ssize_t pwritev(int fd, const struct iovec* iov, int count, off_t offset) override {
    std::string path;
    if (!tracked(fd, &path)) return ::pwritev(fd, iov, count, offset);
    std::lock_guard lock(mu_);
    if (int err = take_locked(write_fault_); err != 0) {
      errno = err;
      return -1;
    }
    std::vector<iovec> cut;
    if (short_write_bytes_ > 0) {
      size_t left = short_write_bytes_;
      for (int i = 0; i < count && left > 0; ++i) {
        size_t n = std::min(left, iov[i].iov_len);
        cut.push_back(iovec{iov[i].iov_base, n});
        left -= n;
      }
      iov = cut.data();
      count = static_cast<int>(cut.size());
    }
    ssize_t n = ::pwritev(fd, iov, count, offset);
    if (n > 0) {
      File& f = files_[path];
      f.size = std::max<uint64_t>(f.size, static_cast<uint64_t>(offset) + static_cast<uint64_t>(n));
    }
    return n;
  }
  ssize_t pread(int fd, void* out, size_t size, off_t offset) override {
    if (tracked(fd, nullptr)) {
      if (int err = take(read_fault_); err != 0) {
        errno = err;
        return -1;
      }
    }
    return ::pread(fd, out, size, offset);
  }
  int fdatasync(int fd) override {
    std::string path;
    if (!tracked(fd, &path)) return ::fdatasync(fd);
    std::chrono::milliseconds delay;
    {
      std::lock_guard lock(mu_);
      delay = sync_delay_;
    }
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    std::lock_guard lock(mu_);
    if (crash_countdown_ > 0 && --crash_countdown_ == 0) {
      power_loss_locked();
      dead_ = true;
      errno = EIO;
      return -1;
    }
    int err = take_locked(sync_fault_);
    File& f = files_[path];
    if (err != 0) {
      // The pages written since the last good sync never reach the disk.
      if (f.size > f.durable) f.lost.emplace_back(f.durable, f.size);
      f.durable = f.size;
      ++syncs_failed_;
      errno = err;
      return -1;
    }
    if (::fdatasync(fd) != 0) return -1;
    f.durable = f.size;
    ++syncs_;
    return 0;
  }
  int fsync(int fd) override { return ::fsync(fd); }
  int ftruncate(int fd, off_t size) override {
    std::string path;
    if (!tracked(fd, &path)) return ::ftruncate(fd, size);
    std::lock_guard lock(mu_);
    if (dead_) {
      errno = EIO;
      return -1;
    }
    int rc = ::ftruncate(fd, size);
    if (rc == 0) {
      File& f = files_[path];
      f.size = static_cast<uint64_t>(size);
      f.durable = std::min<uint64_t>(f.durable, f.size);
    }
    return rc;
  }
  int fstat(int fd, struct stat* out) override { return ::fstat(fd, out); }
  int unlink(const std::string& path) override {
    if (path.find(match_) != std::string::npos) {
      if (int err = take(unlink_fault_); err != 0) {
        errno = err;
        return -1;
      }
    }
    int rc = ::unlink(path.c_str());
    if (rc == 0) {
      std::lock_guard lock(mu_);
      files_.erase(path);
    }
    return rc;
  }

 private:
  struct Fault {
    int err = 0;
    int left = 0;  // -1: forever
  };
  struct File {
    uint64_t durable = 0;  // bytes the last good sync covered
    std::vector<std::pair<uint64_t, uint64_t>> lost;  // [from, to) a failed sync lost
    uint64_t size = 0;     // bytes written
  };

  // REQUIRES: mu_ held.
  void power_loss_locked() {
    for (auto& [path, file] : files_) {
      int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) continue;  // removed since
      struct stat sb {};
      ::fstat(fd, &sb);
      for (const auto& [from, to] : file.lost) {
        if (from >= file.durable) continue;
        uint64_t end = std::min<uint64_t>(to, file.durable);
        std::vector<char> zeros(end - from, 0);
        (void)!::pwrite(fd, zeros.data(), zeros.size(), static_cast<off_t>(from));
      }
      if (static_cast<uint64_t>(sb.st_size) > file.durable) (void)!::ftruncate(fd, static_cast<off_t>(file.durable));
      ::fsync(fd);
      ::close(fd);
      file.lost.clear();
      file.size = file.durable;
    }
  }

  void arm(Fault& f, int err, int count) {
    std::lock_guard lock(mu_);
    f = Fault{err, count};
  }
  int take(Fault& f) {
    std::lock_guard lock(mu_);
    return take_locked(f);
  }
  int take_locked(Fault& f) {
    if (dead_ && &f != &read_fault_) return EIO;
    if (f.err == 0 || f.left == 0) return 0;
    if (f.left > 0) --f.left;
    return f.err;
  }
  bool is_dead() const {
    std::lock_guard lock(mu_);
    return dead_;
  }
  bool tracked(int fd, std::string* path) {
    std::lock_guard lock(mu_);
    auto it = fds_.find(fd);
    if (it == fds_.end()) return false;
    if (path != nullptr) *path = it->second;
    return true;
  }

  const std::string match_;
  mutable std::mutex mu_;
  std::map<int, std::string> fds_;
  std::map<std::string, File> files_;
  Fault write_fault_, sync_fault_, create_fault_, read_fault_, unlink_fault_;
  int crash_countdown_ = 0;  // crash_at_sync: syncs left until the power goes; 0: none armed
  size_t short_write_bytes_ = 0;
  std::chrono::milliseconds sync_delay_{0};
  int syncs_failed_ = 0;
  int syncs_ = 0;
  bool dead_ = false;
};

}  // namespace magnetar::storage::testing
