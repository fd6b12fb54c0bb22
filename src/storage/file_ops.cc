#include "storage/file_ops.h"

#include <fcntl.h>
#include <unistd.h>

namespace magnetar::storage {

namespace {

class PosixFileOps final : public FileOps {
 public:
  int open(const std::string& path, int flags, mode_t mode) override { return ::open(path.c_str(), flags, mode); }
  int close(int fd) override { return ::close(fd); }
  ssize_t pwritev(int fd, const struct iovec* iov, int count, off_t offset) override {
    return ::pwritev(fd, iov, count, offset);
  }
  ssize_t pread(int fd, void* out, size_t size, off_t offset) override { return ::pread(fd, out, size, offset); }
  int fdatasync(int fd) override { return ::fdatasync(fd); }
  int fsync(int fd) override { return ::fsync(fd); }
  int ftruncate(int fd, off_t size) override { return ::ftruncate(fd, size); }
  int fstat(int fd, struct stat* out) override { return ::fstat(fd, out); }
  int unlink(const std::string& path) override { return ::unlink(path.c_str()); }
};

}  // namespace

std::shared_ptr<FileOps> FileOps::posix() {
  static const std::shared_ptr<FileOps> ops = std::make_shared<PosixFileOps>();
  return ops;
}

}  // namespace magnetar::storage
