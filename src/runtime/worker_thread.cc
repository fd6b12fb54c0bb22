#include "runtime/worker_thread.h"

#include <algorithm>

#include "common/logging.h"

namespace magnetar::runtime {

WorkerThread::WorkerThread(std::string name, size_t capacity, size_t threads)
    : name_(std::move(name)), capacity_(capacity) {
  threads_.reserve(std::max<size_t>(threads, 1));
  for (size_t i = 0; i < std::max<size_t>(threads, 1); ++i) {
    threads_.emplace_back([this]() {
      common::set_thread_name(name_);
      run();
    });
  }
}

bool WorkerThread::is_on_thread() const {
  const auto self = std::this_thread::get_id();
  return std::any_of(threads_.begin(), threads_.end(), [&](const std::thread& t) { return t.get_id() == self; });
}

WorkerThread::~WorkerThread() { stop(); }

common::Status WorkerThread::post(Task task) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return common::Status::unavailable(name_ + " is stopping");
    if (queue_.size() >= capacity_) {
      return common::Status::resource_exhausted(name_ + " queue is full");
    }
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  return common::Status::ok();
}

void WorkerThread::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  const auto self = std::this_thread::get_id();
  for (std::thread& t : threads_) {
    if (t.joinable() && t.get_id() != self) t.join();
  }
}

void WorkerThread::run() {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace magnetar::runtime
