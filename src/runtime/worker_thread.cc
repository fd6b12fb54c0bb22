#include "runtime/worker_thread.h"

#include "common/logging.h"

namespace magnetar::runtime {

WorkerThread::WorkerThread(std::string name, size_t capacity)
    : name_(std::move(name)), capacity_(capacity) {
  thread_ = std::thread([this]() {
    common::set_thread_name(name_);
    run();
  });
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
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable() && !is_on_thread()) thread_.join();
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
