// Mailbox: a bounded, lock-free, multi-producer single-consumer queue of Tasks.
//
// A ring of cells, each with a sequence number (D. Vyukov's bounded queue):
// producers claim a cell with one CAS on the tail; the single consumer reads
// in order. Tasks from one producer thread come out in the order it pushed
// them. Each cell also carries a stamp the producer chooses (the reactor
// stores the time of the post, to measure how long tasks wait). A full
// mailbox refuses the push (try_push returns false): the caller decides
// whether to back off, fail the request or wait.
//
// Memory: cells come zeroed from calloc and a zero cell is a valid empty
// one (its sequence is stored relative to its index), so an idle mailbox
// costs no resident memory; pages are touched only as the ring is used.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "runtime/task.h"

namespace magnetar::runtime {

class Mailbox {
 public:
  // REQUIRES: capacity is a power of two >= 2.
  explicit Mailbox(size_t capacity);
  ~Mailbox();
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;

  // Any thread. Returns false, leaving `task` untouched, when full.
  bool try_push(Task& task, int64_t stamp = 0);
  // Consumer thread only. Returns false when empty. `stamp`, when given,
  // receives the stamp pushed with the task.
  bool try_pop(Task& out, int64_t* stamp = nullptr);
  // Approximate; for metrics.
  size_t size_approx() const;
  size_t capacity() const { return mask_ + 1; }

 private:
  struct Cell {
    std::atomic<uint64_t> turn;  // Vyukov's sequence minus the cell's index
    int64_t stamp;
    Task task;
  };
  uint64_t sequence(size_t index, std::memory_order order) const {
    return cells_[index].turn.load(order) + index;
  }
  void set_sequence(size_t index, uint64_t seq, std::memory_order order) {
    cells_[index].turn.store(seq - index, order);
  }

  Cell* cells_;
  size_t mask_;
  alignas(64) std::atomic<uint64_t> tail_{0};  // next cell to claim (producers)
  alignas(64) std::atomic<uint64_t> head_{0};  // next cell to read (consumer writes)
};

}  // namespace magnetar::runtime
