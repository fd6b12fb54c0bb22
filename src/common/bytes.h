// Ref-counted byte buffers.
//
// Bytes travel from socket to disk to consumers as Slices of one Buffer, not
// copies. A Buffer is one heap block with an atomic reference count; a Slice is
// (buffer, offset, length) and keeps its Buffer alive. Slices may be handed to
// other threads; the bytes a Slice covers must not change once it is shared
// (writers fill a Buffer first, then cut Slices from the filled part).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace magnetar::common {

// The big-endian 32-bit integer at `p`, which must have 4 readable bytes.
inline uint32_t load_u32_be(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

class Buffer {
 public:
  // A new block with reference count 1, owned by the caller.
  static Buffer* allocate(size_t capacity);

  void ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) destroy(this);
  }
  uint32_t use_count() const { return refs_.load(std::memory_order_acquire); }

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t capacity() const { return capacity_; }

  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

 private:
  explicit Buffer(size_t capacity) : capacity_(static_cast<uint32_t>(capacity)) {}
  static void destroy(Buffer* b);

  std::atomic<uint32_t> refs_{1};
  uint32_t capacity_;
  alignas(16) uint8_t data_[];
};

class Slice {
 public:
  Slice() = default;
  // Takes one reference on `buffer`. REQUIRES: offset + size <= capacity.
  Slice(Buffer* buffer, size_t offset, size_t size);
  // A fresh buffer of exactly `size` bytes; fill it through mutable_data()
  // before sharing the slice.
  static Slice allocate(size_t size);
  static Slice copy_of(const void* data, size_t size);
  static Slice copy_of(std::string_view s) { return copy_of(s.data(), s.size()); }

  Slice(const Slice& o) : buf_(o.buf_), off_(o.off_), len_(o.len_) { if (buf_) buf_->ref(); }
  Slice(Slice&& o) noexcept : buf_(std::exchange(o.buf_, nullptr)), off_(o.off_), len_(std::exchange(o.len_, 0)) {}
  Slice& operator=(Slice o) noexcept {
    std::swap(buf_, o.buf_);
    std::swap(off_, o.off_);
    std::swap(len_, o.len_);
    return *this;
  }
  ~Slice() { if (buf_) buf_->unref(); }

  const uint8_t* data() const { return buf_ ? buf_->data() + off_ : nullptr; }
  // For the producer of the bytes, before the slice is shared.
  uint8_t* mutable_data() { return buf_ ? buf_->data() + off_ : nullptr; }
  size_t size() const { return len_; }
  bool empty() const { return len_ == 0; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data()), len_}; }
  std::string to_string() const { return std::string(view()); }

  // A view of [offset, offset + size) sharing the same buffer.
  // REQUIRES: offset + size <= this->size().
  Slice sub(size_t offset, size_t size) const;
  Slice sub(size_t offset) const { return sub(offset, len_ - offset); }
  // Drops the first n bytes. REQUIRES: n <= size().
  void remove_prefix(size_t n) { off_ += static_cast<uint32_t>(n); len_ -= static_cast<uint32_t>(n); }
  void truncate(size_t n) { if (n < len_) len_ = static_cast<uint32_t>(n); }

  const Buffer* buffer() const { return buf_; }

 private:
  Buffer* buf_ = nullptr;
  uint32_t off_ = 0;
  uint32_t len_ = 0;
};

// An ordered chain of slices: what a connection has read and not yet decoded,
// or a message assembled from several parts. Consuming from the front is O(1)
// per slice; nothing is copied unless a caller asks for contiguous bytes that
// span two slices.
class SliceChain {
 public:
  void append(Slice s) {
    if (s.empty()) return;
    size_ += s.size();
    slices_.push_back(std::move(s));
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // The first slice with unconsumed bytes. REQUIRES: !empty().
  const Slice& front() const { return slices_[head_]; }

  // Copies the first n bytes into dst without consuming. REQUIRES: n <= size().
  void copy_out(void* dst, size_t n) const;
  // The first n bytes as one slice: shares the buffer when they lie in one
  // slice, copies otherwise. Consumes them. REQUIRES: n <= size().
  Slice take_front(size_t n);
  // Drops the first n bytes. REQUIRES: n <= size().
  void consume(size_t n);
  void clear() { slices_.clear(); head_ = 0; size_ = 0; }

 private:
  void compact();

  std::vector<Slice> slices_;
  size_t head_ = 0;  // index of the first live slice in slices_
  size_t size_ = 0;
};

// Builds an outgoing frame or batch into one buffer, growing it by doubling.
// finish() hands the bytes written so far out as a Slice and leaves the
// writer empty and reusable. Big-endian helpers
// match the byte order of the Pulsar, Kafka and AMQP wires.
class BufferWriter {
 public:
  explicit BufferWriter(size_t initial_capacity = 256);
  ~BufferWriter();
  BufferWriter(const BufferWriter&) = delete;
  BufferWriter& operator=(const BufferWriter&) = delete;

  void append(const void* data, size_t n);
  void append(std::string_view s) { append(s.data(), s.size()); }
  void put_u8(uint8_t v) { append(&v, 1); }
  void put_u16_be(uint16_t v);
  void put_u32_be(uint32_t v);
  void put_u64_be(uint64_t v);
  // Reserves n bytes and returns their offset, for lengths patched later.
  size_t skip(size_t n);
  void patch_u32_be(size_t offset, uint32_t v);
  // REQUIRES: offset < size().
  uint8_t* at(size_t offset) { return buf_->data() + offset; }

  size_t size() const { return size_; }
  Slice finish();

 private:
  void reserve(size_t extra);

  Buffer* buf_ = nullptr;  // allocated on first write; handed out by finish()
  size_t initial_capacity_;
  size_t size_ = 0;
};

}  // namespace magnetar::common
