// WorkerThread: a named thread for blocking work (file I/O, LevelDB, DNS).
//
// Reactors hand it tasks with post(); a task reports back by posting to the
// reactor that asked. The queue is bounded: a full queue is an error the
// caller handles.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "common/status.h"
#include "runtime/task.h"

namespace magnetar::runtime {

class WorkerThread {
 public:
  WorkerThread(std::string name, size_t capacity = 1 << 14);
  ~WorkerThread();  // runs every queued task, then joins
  WorkerThread(const WorkerThread&) = delete;
  WorkerThread& operator=(const WorkerThread&) = delete;

  // Any thread. ResourceExhausted when full, Unavailable after stop().
  common::Status post(Task task);
  // Finishes queued tasks and joins. Idempotent.
  void stop();
  bool is_on_thread() const { return std::this_thread::get_id() == thread_.get_id(); }
  const std::string& name() const { return name_; }

 private:
  void run();

  const std::string name_;
  const size_t capacity_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace magnetar::runtime
