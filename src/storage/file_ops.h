// FileOps: every file system call storage makes on segment files, behind one
// interface, so that tests can make any of them fail (EIO, ENOSPC, short
// writes, a failed fdatasync, a power loss) and run the real journal,
// recovery and read path through the fault.
//
// The calls mirror POSIX: they return what the system call returns (-1 on
// failure) and leave the reason in errno. The index (LevelDB) does its own
// I/O and is not behind this seam.
//
// Threads: an implementation may be called from any thread at once (the
// journal, its sync thread, the readers, recovery).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <memory>
#include <string>

namespace magnetar::storage {

class FileOps {
 public:
  virtual ~FileOps() = default;
  virtual int open(const std::string& path, int flags, mode_t mode) = 0;
  virtual int close(int fd) = 0;
  virtual ssize_t pwritev(int fd, const struct iovec* iov, int count, off_t offset) = 0;
  virtual ssize_t pread(int fd, void* out, size_t size, off_t offset) = 0;
  virtual int fdatasync(int fd) = 0;
  // fsync of a file or (opened O_DIRECTORY) a directory.
  virtual int fsync(int fd) = 0;
  virtual int ftruncate(int fd, off_t size) = 0;
  virtual int fstat(int fd, struct stat* out) = 0;
  virtual int unlink(const std::string& path) = 0;

  // The real system calls. Lives as long as the process.
  static std::shared_ptr<FileOps> posix();
};

}  // namespace magnetar::storage
