#include "runtime/mailbox.h"

#include <cassert>
#include <cstdlib>
#include <new>
#include <type_traits>

namespace magnetar::runtime {

static_assert(std::is_standard_layout_v<std::atomic<uint64_t>>);

Mailbox::Mailbox(size_t capacity)
    : cells_(static_cast<Cell*>(std::calloc(capacity, sizeof(Cell)))), mask_(capacity - 1) {
  assert(capacity >= 2 && (capacity & (capacity - 1)) == 0);
  if (cells_ == nullptr) throw std::bad_alloc();
}

Mailbox::~Mailbox() {
  Task task;
  while (try_pop(task)) task.reset();  // drop what was never run
  std::free(cells_);
}

bool Mailbox::try_push(Task& task, int64_t stamp) {
  uint64_t pos = tail_.load(std::memory_order_relaxed);
  for (;;) {
    size_t index = pos & mask_;
    Cell& cell = cells_[index];
    uint64_t seq = sequence(index, std::memory_order_acquire);
    auto diff = static_cast<int64_t>(seq) - static_cast<int64_t>(pos);
    if (diff == 0) {
      if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
        cell.task = std::move(task);
        cell.stamp = stamp;
        set_sequence(index, pos + 1, std::memory_order_release);
        return true;
      }
    } else if (diff < 0) {
      return false;  // the consumer has not freed this cell yet: full
    } else {
      pos = tail_.load(std::memory_order_relaxed);
    }
  }
}

bool Mailbox::try_pop(Task& out, int64_t* stamp) {
  uint64_t head = head_.load(std::memory_order_relaxed);
  size_t index = head & mask_;
  Cell& cell = cells_[index];
  uint64_t seq = sequence(index, std::memory_order_acquire);
  if (static_cast<int64_t>(seq) - static_cast<int64_t>(head + 1) < 0) return false;
  out = std::move(cell.task);
  if (stamp != nullptr) *stamp = cell.stamp;
  set_sequence(index, head + mask_ + 1, std::memory_order_release);
  head_.store(head + 1, std::memory_order_relaxed);
  return true;
}

size_t Mailbox::size_approx() const {
  uint64_t tail = tail_.load(std::memory_order_relaxed);
  uint64_t head = head_.load(std::memory_order_relaxed);
  return tail >= head ? static_cast<size_t>(tail - head) : 0;
}

}  // namespace magnetar::runtime
