#include "common/bytes.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <new>

namespace magnetar::common {

Buffer* Buffer::allocate(size_t capacity) {
  assert(capacity <= UINT32_MAX);
  void* mem = std::malloc(sizeof(Buffer) + capacity);
  if (mem == nullptr) throw std::bad_alloc();
  return new (mem) Buffer(capacity);
}

void Buffer::destroy(Buffer* b) {
  b->~Buffer();
  std::free(b);
}

Slice::Slice(Buffer* buffer, size_t offset, size_t size)
    : buf_(buffer), off_(static_cast<uint32_t>(offset)), len_(static_cast<uint32_t>(size)) {
  assert(offset + size <= buffer->capacity());
  buf_->ref();
}

Slice Slice::allocate(size_t size) {
  Buffer* b = Buffer::allocate(size);
  Slice s(b, 0, size);
  b->unref();  // the slice holds the only reference now
  return s;
}

Slice Slice::copy_of(const void* data, size_t size) {
  Slice s = allocate(size);
  if (size > 0) std::memcpy(s.mutable_data(), data, size);
  return s;
}

Slice Slice::sub(size_t offset, size_t size) const {
  assert(offset + size <= len_);
  if (buf_ == nullptr) return Slice();
  return Slice(buf_, off_ + offset, size);
}

void SliceChain::copy_out(void* dst, size_t n) const {
  assert(n <= size_);
  auto* out = static_cast<uint8_t*>(dst);
  for (size_t i = head_; n > 0; ++i) {
    size_t k = std::min(n, slices_[i].size());
    std::memcpy(out, slices_[i].data(), k);
    out += k;
    n -= k;
  }
}

Slice SliceChain::take_front(size_t n) {
  assert(n <= size_);
  if (n == 0) return Slice();
  Slice& first = slices_[head_];
  Slice out;
  if (first.size() >= n) {
    out = first.sub(0, n);
  } else {
    out = Slice::allocate(n);
    copy_out(out.mutable_data(), n);
  }
  consume(n);
  return out;
}

void SliceChain::consume(size_t n) {
  assert(n <= size_);
  size_ -= n;
  while (n > 0) {
    Slice& s = slices_[head_];
    if (s.size() <= n) {
      n -= s.size();
      s = Slice();
      ++head_;
    } else {
      s.remove_prefix(n);
      n = 0;
    }
  }
  compact();
}

void SliceChain::compact() {
  if (head_ == slices_.size()) {
    slices_.clear();
    head_ = 0;
  } else if (head_ > 16 && head_ * 2 > slices_.size()) {
    slices_.erase(slices_.begin(), slices_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
}

BufferWriter::BufferWriter(size_t initial_capacity)
    : initial_capacity_(initial_capacity < 16 ? 16 : initial_capacity) {}

BufferWriter::~BufferWriter() {
  if (buf_) buf_->unref();
}

void BufferWriter::reserve(size_t extra) {
  if (buf_ == nullptr) buf_ = Buffer::allocate(std::max(initial_capacity_, extra));
  if (size_ + extra <= buf_->capacity()) return;
  size_t cap = buf_->capacity() * 2;
  while (cap < size_ + extra) cap *= 2;
  Buffer* bigger = Buffer::allocate(cap);
  std::memcpy(bigger->data(), buf_->data(), size_);
  buf_->unref();
  buf_ = bigger;
}

void BufferWriter::append(const void* data, size_t n) {
  reserve(n);
  if (n > 0) std::memcpy(buf_->data() + size_, data, n);
  size_ += n;
}

void BufferWriter::put_u16_be(uint16_t v) {
  uint8_t b[2] = {static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v)};
  append(b, 2);
}

void BufferWriter::put_u32_be(uint32_t v) {
  reserve(4);
  patch_u32_be(size_, v);
  size_ += 4;
}

void BufferWriter::put_u64_be(uint64_t v) {
  put_u32_be(static_cast<uint32_t>(v >> 32));
  put_u32_be(static_cast<uint32_t>(v));
}

size_t BufferWriter::skip(size_t n) {
  reserve(n);
  size_t at = size_;
  std::memset(buf_->data() + size_, 0, n);
  size_ += n;
  return at;
}

void BufferWriter::patch_u32_be(size_t offset, uint32_t v) {
  uint8_t* p = buf_->data() + offset;
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

Slice BufferWriter::finish() {
  if (buf_ == nullptr) return Slice();
  Slice out(buf_, 0, size_);
  buf_->unref();
  buf_ = nullptr;
  size_ = 0;
  return out;
}

}  // namespace magnetar::common
