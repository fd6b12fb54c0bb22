#include "storage/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include "common/logging.h"

namespace magnetar::storage {

using common::Result;
using common::Slice;
using common::Status;

namespace {

constexpr const char* kSuffix = ".seg";
constexpr size_t kScanChunk = 4u << 20;

Status read_fully(FileOps& ops, int fd, uint8_t* out, size_t size, uint64_t offset, size_t* got) {
  *got = 0;
  while (*got < size) {
    ssize_t n = ops.pread(fd, out + *got, size - *got, static_cast<off_t>(offset + *got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::from_errno(errno, "read segment");
    }
    if (n == 0) break;  // end of file
    *got += static_cast<size_t>(n);
  }
  return Status::ok();
}

}  // namespace

std::string segment_file_name(uint64_t segment_id) {
  char name[40];
  std::snprintf(name, sizeof(name), "%020llu%s", static_cast<unsigned long long>(segment_id), kSuffix);
  return name;
}

std::string segment_path(const std::string& segments_dir, uint64_t segment_id) {
  return segments_dir + "/" + segment_file_name(segment_id);
}

Result<std::vector<uint64_t>> list_segments(const std::string& segments_dir) {
  DIR* d = ::opendir(segments_dir.c_str());
  if (d == nullptr) return Status::from_errno(errno, "list " + segments_dir);
  std::vector<uint64_t> ids;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.size() != 20 + std::strlen(kSuffix) || name.substr(20) != kSuffix) continue;
    if (!std::all_of(name.begin(), name.begin() + 20, ::isdigit)) continue;
    ids.push_back(std::stoull(name.substr(0, 20)));
  }
  ::closedir(d);
  std::sort(ids.begin(), ids.end());
  return ids;
}

Status ensure_directory(const std::string& path) {
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    std::string prefix = path.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::from_errno(errno, "create directory " + prefix);
    }
  }
  return Status::ok();
}

Status sync_directory(const std::string& path, FileOps& ops) {
  int fd = ops.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  if (fd < 0) return Status::from_errno(errno, "open directory " + path);
  int rc = ops.fsync(fd);
  int err = errno;
  ops.close(fd);
  if (rc != 0) return Status::from_errno(err, "sync directory " + path);
  return Status::ok();
}

// ---- SegmentAppender ----

Result<std::unique_ptr<SegmentAppender>> SegmentAppender::create(const std::string& segments_dir,
                                                                 uint64_t segment_id, FileOps& ops) {
  std::string path = segment_path(segments_dir, segment_id);
  int fd = ops.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::from_errno(errno, "create segment " + path);
  std::unique_ptr<SegmentAppender> seg(new SegmentAppender(ops, segment_id, fd, 0));
  uint8_t header[format::kFileHeaderSize];
  format::encode_file_header(header, segment_id);
  iovec iov{header, sizeof(header)};
  Status st = seg->append(&iov, 1, sizeof(header));
  if (st.is_ok()) st = seg->sync();
  if (st.is_ok()) st = sync_directory(segments_dir, ops);
  if (!st.is_ok()) {
    seg.reset();
    ops.unlink(path);
    return st;
  }
  return seg;
}

Result<std::unique_ptr<SegmentAppender>> SegmentAppender::reopen(const std::string& segments_dir,
                                                                 uint64_t segment_id, uint64_t size, FileOps& ops) {
  std::string path = segment_path(segments_dir, segment_id);
  int fd = ops.open(path, O_WRONLY | O_CLOEXEC, 0);
  if (fd < 0) return Status::from_errno(errno, "open segment " + path);
  struct stat sb {};
  if (ops.fstat(fd, &sb) != 0) {
    int err = errno;
    ops.close(fd);
    return Status::from_errno(err, "stat segment " + path);
  }
  // Synced even when nothing is cut: what an earlier process wrote may sit
  // in the page cache only, and from here on it counts as durable.
  if ((static_cast<uint64_t>(sb.st_size) != size && ops.ftruncate(fd, static_cast<off_t>(size)) != 0) ||
      ops.fdatasync(fd) != 0) {
    int err = errno;
    ops.close(fd);
    return Status::from_errno(err, "cut segment " + path);
  }
  return std::unique_ptr<SegmentAppender>(new SegmentAppender(ops, segment_id, fd, size));
}

SegmentAppender::~SegmentAppender() {
  if (fd_ >= 0) ops_.close(fd_);
}

Status SegmentAppender::append(const struct iovec* iov, size_t count, size_t total_bytes) {
  if (broken()) return Status::io_error("segment " + segment_file_name(id_) + " is unusable after a failed cut");
  const uint64_t start = size_;
  size_t done = 0;
  size_t i = 0;
  size_t skip = 0;  // bytes of iov[i] already written
  std::vector<iovec> window;
  Status failure;
  while (done < total_bytes) {
    window.clear();
    for (size_t j = i; j < count && window.size() < IOV_MAX; ++j) {
      iovec v = iov[j];
      if (j == i) {
        v.iov_base = static_cast<uint8_t*>(v.iov_base) + skip;
        v.iov_len -= skip;
      }
      if (v.iov_len > 0) window.push_back(v);
    }
    ssize_t n = ops_.pwritev(fd_, window.data(), static_cast<int>(window.size()),
                             static_cast<off_t>(start + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      failure = Status::from_errno(errno, "write segment " + segment_file_name(id_));
      break;
    }
    if (n == 0) {
      failure = Status::io_error("write segment " + segment_file_name(id_) + ": wrote nothing");
      break;
    }
    done += static_cast<size_t>(n);
    size_t left = static_cast<size_t>(n);
    while (left > 0 && i < count) {
      size_t rest = iov[i].iov_len - skip;
      if (left >= rest) {
        left -= rest;
        ++i;
        skip = 0;
      } else {
        skip += left;
        left = 0;
      }
    }
  }
  if (failure.is_ok()) {
    size_ = start + done;
    return failure;
  }
  if (done > 0 && ops_.ftruncate(fd_, static_cast<off_t>(start)) != 0) {
    broken_ = true;
    MLOG_ERROR("segment {}: cannot cut a failed write back: {}", segment_file_name(id_), std::strerror(errno));
  }
  return failure;
}

Status SegmentAppender::sync() {
  if (broken()) {
    // Linux reports a writeback error to one fdatasync only: a later one
    // would succeed over pages that never reached the disk.
    return Status::io_error("segment " + segment_file_name(id_) + " lost writes to an earlier failed sync");
  }
  if (ops_.fdatasync(fd_) != 0) {
    // After a failed fdatasync the page cache state is unknown: never retry.
    int err = errno;
    broken_ = true;
    return Status::from_errno(err, "sync segment " + segment_file_name(id_));
  }
  return Status::ok();
}

// ---- SegmentReader ----

Result<std::shared_ptr<SegmentReader>> SegmentReader::open(const std::string& segments_dir,
                                                           uint64_t segment_id, FileOps& ops) {
  std::string path = segment_path(segments_dir, segment_id);
  int fd = ops.open(path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return Status::from_errno(errno, "open segment " + path);
  return std::shared_ptr<SegmentReader>(new SegmentReader(ops, segment_id, fd));
}

SegmentReader::~SegmentReader() {
  if (fd_ >= 0) ops_.close(fd_);
}

Result<Slice> SegmentReader::read(uint64_t offset, size_t size) const {
  Slice out = Slice::allocate(size);
  size_t got = 0;
  MAGNETAR_RETURN_IF_ERROR(read_fully(ops_, fd_, out.mutable_data(), size, offset, &got));
  if (got < size) {
    return Status::corruption("segment " + segment_file_name(id_) + " ends before offset " +
                              std::to_string(offset + size));
  }
  return out;
}

Result<Slice> decode_entry_record(const Slice& bytes, uint64_t ledger, int64_t entry) {
  auto where = [&] { return "entry " + std::to_string(ledger) + ":" + std::to_string(entry); };
  if (bytes.size() < format::kRecordHeaderSize) return Status::corruption(where() + ": short record");
  format::RecordHeader h = format::decode_record_header(bytes.data());
  if (!format::header_plausible(h) || bytes.size() != format::kRecordHeaderSize + h.length ||
      !format::record_checksum_ok(bytes.data(), h)) {
    return Status::corruption(where() + ": checksum mismatch");
  }
  if (h.type != format::RecordType::kEntry || h.ledger != ledger || h.entry != entry) {
    return Status::corruption(where() + ": index points at another record");
  }
  return bytes.sub(format::kRecordHeaderSize, h.length);
}

// ---- scan ----

namespace {

// A sequential window over one segment file for the scan.
class ScanWindow {
 public:
  ScanWindow(FileOps& ops, int fd, uint64_t file_size) : ops_(ops), fd_(fd), file_size_(file_size) {}
  // The bytes [pos, pos + need), or null when the file ends before.
  Result<const uint8_t*> at(uint64_t pos, size_t need) {
    if (pos + need > file_size_) return static_cast<const uint8_t*>(nullptr);
    if (pos < offset_ || pos + need > offset_ + buf_.size()) {
      buf_.resize(std::max(need, kScanChunk));
      size_t n = 0;
      MAGNETAR_RETURN_IF_ERROR(read_fully(ops_, fd_, buf_.data(), buf_.size(), pos, &n));
      buf_.resize(n);
      offset_ = pos;
      if (n < need) return static_cast<const uint8_t*>(nullptr);
    }
    return buf_.data() + (pos - offset_);
  }

 private:
  FileOps& ops_;
  const int fd_;
  const uint64_t file_size_;
  std::vector<uint8_t> buf_;
  uint64_t offset_ = 0;
};

}  // namespace

Result<ScanResult> scan_segment(const std::string& segments_dir, uint64_t segment_id, uint64_t start,
                                const std::function<void(const ScannedRecord&)>& fn, const ResyncFilter& resync,
                                FileOps& ops) {
  std::string path = segment_path(segments_dir, segment_id);
  int fd = ops.open(path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return Status::from_errno(errno, "open segment " + path);
  struct Closer {
    FileOps& ops;
    int fd;
    ~Closer() { ops.close(fd); }
  } closer{ops, fd};
  struct stat sb {};
  if (ops.fstat(fd, &sb) != 0) return Status::from_errno(errno, "stat segment " + path);
  ScanResult result;
  result.file_size = static_cast<uint64_t>(sb.st_size);
  uint8_t header[format::kFileHeaderSize];
  size_t got = 0;
  MAGNETAR_RETURN_IF_ERROR(read_fully(ops, fd, header, sizeof(header), 0, &got));
  if (got < sizeof(header) || !format::file_header_matches(header, segment_id)) return result;
  result.header_ok = true;
  start = std::max<uint64_t>(start, format::kFileHeaderSize);
  result.valid_end = std::min(start, result.file_size);
  if (start > result.file_size) return result;

  ScanWindow window(ops, fd, result.file_size);
  // The good record at `pos`, if one starts there; `filter` first when set.
  auto record_at = [&](uint64_t pos, const ResyncFilter* filter) -> Result<std::optional<ScannedRecord>> {
    auto head = window.at(pos, format::kRecordHeaderSize);
    if (!head) return head.status();
    if (*head == nullptr) return std::optional<ScannedRecord>();
    format::RecordHeader h = format::decode_record_header(*head);
    if (!format::header_plausible(h) || pos + format::kRecordHeaderSize + h.length > result.file_size) {
      return std::optional<ScannedRecord>();
    }
    if (filter != nullptr && *filter && !(*filter)(h)) return std::optional<ScannedRecord>();
    const size_t size = format::kRecordHeaderSize + h.length;
    auto whole = window.at(pos, size);
    if (!whole) return whole.status();
    if (*whole == nullptr || !format::record_checksum_ok(*whole, h)) return std::optional<ScannedRecord>();
    return std::optional<ScannedRecord>(
        ScannedRecord{h, pos, static_cast<uint32_t>(size), *whole + format::kRecordHeaderSize});
  };
  uint64_t pos = start;
  while (pos < result.file_size) {
    auto rec = record_at(pos, nullptr);
    if (!rec) return rec.status();
    if (!rec->has_value()) {
      // Damage or the torn end: look for the next good record.
      uint64_t next = pos + 1;
      for (; next < result.file_size; ++next) {
        rec = record_at(next, &resync);
        if (!rec) return rec.status();
        if (rec->has_value()) break;
      }
      if (!rec->has_value()) break;  // nothing good follows: a torn tail
      result.damaged.push_back(DamagedRange{pos, next - pos});
      pos = next;
    }
    const ScannedRecord& r = **rec;
    fn(r);
    pos += r.size;
    result.valid_end = pos;
  }
  return result;
}

}  // namespace magnetar::storage
