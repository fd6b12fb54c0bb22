#include "server/unsynced_files.h"

#include <leveldb/env.h>

namespace magnetar::server {
namespace {

class UnsyncedWritableFile final : public leveldb::WritableFile {
 public:
  explicit UnsyncedWritableFile(leveldb::WritableFile* file) : file_(file) {}
  leveldb::Status Append(const leveldb::Slice& data) override { return file_->Append(data); }
  leveldb::Status Close() override { return file_->Close(); }
  leveldb::Status Flush() override { return file_->Flush(); }
  leveldb::Status Sync() override { return file_->Flush(); }  // into the page cache, no further

 private:
  std::unique_ptr<leveldb::WritableFile> file_;
};

class UnsyncedEnv final : public leveldb::EnvWrapper {
 public:
  UnsyncedEnv() : leveldb::EnvWrapper(leveldb::Env::Default()) {}

  leveldb::Status NewWritableFile(const std::string& name, leveldb::WritableFile** result) override {
    return wrap(target()->NewWritableFile(name, result), result);
  }
  leveldb::Status NewAppendableFile(const std::string& name, leveldb::WritableFile** result) override {
    return wrap(target()->NewAppendableFile(name, result), result);
  }

 private:
  static leveldb::Status wrap(leveldb::Status s, leveldb::WritableFile** result) {
    if (s.ok()) *result = new UnsyncedWritableFile(*result);
    return s;
  }
};

class UnsyncedFileOps final : public storage::FileOps {
 public:
  UnsyncedFileOps() : real_(storage::FileOps::posix()) {}
  int open(const std::string& path, int flags, mode_t mode) override { return real_->open(path, flags, mode); }
  int close(int fd) override { return real_->close(fd); }
  ssize_t pwritev(int fd, const struct iovec* iov, int count, off_t offset) override {
    return real_->pwritev(fd, iov, count, offset);
  }
  ssize_t pread(int fd, void* out, size_t size, off_t offset) override { return real_->pread(fd, out, size, offset); }
  int fdatasync(int) override { return 0; }
  int fsync(int) override { return 0; }
  int ftruncate(int fd, off_t size) override { return real_->ftruncate(fd, size); }
  int fstat(int fd, struct stat* out) override { return real_->fstat(fd, out); }
  int unlink(const std::string& path) override { return real_->unlink(path); }

 private:
  std::shared_ptr<storage::FileOps> real_;
};

}  // namespace

leveldb::Env* unsynced_leveldb_env() {
  static UnsyncedEnv* env = new UnsyncedEnv();  // never destroyed: DBs may outlive any scope
  return env;
}

std::shared_ptr<storage::FileOps> unsynced_file_ops() {
  static auto ops = std::make_shared<UnsyncedFileOps>();
  return ops;
}

}  // namespace magnetar::server
