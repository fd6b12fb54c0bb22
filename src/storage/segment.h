// Segment files: the append-only files that are both journal and data.
//
// Layout in record_format.h. Segments live in <dir>/segments/ named by id
// (00000000000000000001.seg); ids grow, the highest is the one appended to.
// SegmentAppender is owned by the journal thread; read_record and
// scan_segment may run on any thread, concurrently with appends (they read
// only bytes below the size the journal has published).
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/bytes.h"
#include "common/result.h"
#include "common/status.h"
#include "storage/file_ops.h"
#include "storage/record_format.h"

namespace magnetar::storage {

std::string segment_file_name(uint64_t segment_id);
std::string segment_path(const std::string& segments_dir, uint64_t segment_id);
// Segment ids present in `segments_dir`, ascending.
common::Result<std::vector<uint64_t>> list_segments(const std::string& segments_dir);
// Creates `path` and its parents if missing.
common::Status ensure_directory(const std::string& path);
// fsync of a directory, so that a created or removed name is durable.
common::Status sync_directory(const std::string& path, FileOps& ops = *FileOps::posix());

class SegmentAppender {
 public:
  // Creates a new segment with its file header, synced, its name synced in
  // the directory. Fails if the file exists.
  static common::Result<std::unique_ptr<SegmentAppender>> create(const std::string& segments_dir,
                                                                 uint64_t segment_id,
                                                                 FileOps& ops = *FileOps::posix());
  // Reopens an existing segment whose valid bytes end at `size` (anything
  // past it is cut), synced. Used after recovery.
  static common::Result<std::unique_ptr<SegmentAppender>> reopen(const std::string& segments_dir,
                                                                 uint64_t segment_id, uint64_t size,
                                                                 FileOps& ops = *FileOps::posix());
  ~SegmentAppender();
  SegmentAppender(const SegmentAppender&) = delete;
  SegmentAppender& operator=(const SegmentAppender&) = delete;

  // Writes `iov` at the end of the file (pwritev, looping over short writes
  // and IOV_MAX). On failure the file is cut back to its size before the
  // call; if even that fails, the returned error says so and the appender is
  // broken() for good.
  common::Status append(const struct iovec* iov, size_t count, size_t total_bytes);
  // fdatasync. May run on another thread than append(), concurrently.
  // Once a sync failed the pages written since the last good one may be
  // gone while the kernel reports the error only once: the appender is
  // broken() for good and every later sync (and append) fails too.
  common::Status sync();
  uint64_t id() const { return id_; }
  uint64_t size() const { return size_; }
  bool broken() const { return broken_.load(std::memory_order_acquire); }

 private:
  SegmentAppender(FileOps& ops, uint64_t id, int fd, uint64_t size) : ops_(ops), id_(id), fd_(fd), size_(size) {}
  FileOps& ops_;
  const uint64_t id_;
  int fd_;
  uint64_t size_;
  std::atomic<bool> broken_{false};
};

// A read-only handle on one segment, shared by readers.
class SegmentReader {
 public:
  static common::Result<std::shared_ptr<SegmentReader>> open(const std::string& segments_dir,
                                                             uint64_t segment_id,
                                                             FileOps& ops = *FileOps::posix());
  ~SegmentReader();
  SegmentReader(const SegmentReader&) = delete;
  SegmentReader& operator=(const SegmentReader&) = delete;

  // Reads [offset, offset + size) into one new buffer. kCorruption when the
  // file ends before (the bytes were cut or never made it to disk).
  common::Result<common::Slice> read(uint64_t offset, size_t size) const;
  uint64_t id() const { return id_; }

 private:
  SegmentReader(FileOps& ops, uint64_t id, int fd) : ops_(ops), id_(id), fd_(fd) {}
  FileOps& ops_;
  const uint64_t id_;
  int fd_;
};

// Verifies the record at the start of `bytes` (its header and exactly its
// payload) and that it is entry `entry` of `ledger`; returns the payload as a
// view of the same buffer. kCorruption otherwise.
common::Result<common::Slice> decode_entry_record(const common::Slice& bytes, uint64_t ledger,
                                                  int64_t entry);

struct ScannedRecord {
  format::RecordHeader header;
  uint64_t offset;     // of the record's first byte
  uint32_t size;       // header + payload
  const uint8_t* payload;  // valid only during the callback
};

// Bytes between two good records that hold no good record: a damaged
// stretch of the file (flipped bits, a torn page, overwritten bytes).
struct DamagedRange {
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct ScanResult {
  uint64_t valid_end = 0;  // offset just past the last good record
  uint64_t file_size = 0;  // > valid_end when a torn or corrupt tail follows
  bool header_ok = false;  // false: the file header itself is missing or bad
  std::vector<DamagedRange> damaged;  // in file order; none reaches valid_end
};

// Whether a record header found while looking for good records past a
// damaged stretch may start one: a cheap filter (say, "its ledger is
// known") applied before the checksum is computed.
using ResyncFilter = std::function<bool(const format::RecordHeader&)>;

// Reads the segment sequentially from `start` (>= the file header) and calls
// `fn` for each good record. A record that is short, implausible or fails
// its checksum is damage, not the end: the scan looks for the next good
// record past it (one whose header passes `resync` when given, and whose
// checksum holds) and goes on from there, reporting the stretch in between
// as damaged. Only when no good record follows does the scan end, at
// valid_end (a torn tail). Returns kIoError only when the file cannot be
// read at all.
common::Result<ScanResult> scan_segment(const std::string& segments_dir, uint64_t segment_id,
                                        uint64_t start,
                                        const std::function<void(const ScannedRecord&)>& fn,
                                        const ResyncFilter& resync = nullptr,
                                        FileOps& ops = *FileOps::posix());

}  // namespace magnetar::storage
