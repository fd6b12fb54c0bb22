#include "runtime/loop_stats.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "common/logging.h"
#include "common/stage_timing.h"

namespace magnetar::runtime {
namespace {

common::Labels reactor_label(size_t index) { return {{"reactor", std::to_string(index)}}; }

double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

}  // namespace

LoopStats::LoopStats(size_t index, std::string reactor_name)
    : reactor_name_(std::move(reactor_name)),
      wait_(common::MetricsRegistry::global().histogram(
          "magnetar_reactor_mailbox_wait_seconds",
          "Time a task posted to the reactor waited in its mailbox before it began to run",
          common::stage_latency_bounds(), reactor_label(index))),
      busy_(common::MetricsRegistry::global().histogram(
          "magnetar_reactor_busy_seconds",
          "Time one iteration of the reactor's loop ran between two polls (I/O callbacks, timers, mailbox and "
          "deferred tasks); nothing else the reactor owns moves meanwhile",
          common::stage_latency_bounds(), reactor_label(index))),
      slow_count_(common::MetricsRegistry::global().counter(
          "magnetar_reactor_slow_callbacks_total",
          "Callbacks, or loop iterations of many short ones, that held the reactor past the slow threshold",
          reactor_label(index))),
      slow_ns_(std::chrono::nanoseconds(kDefaultSlowThreshold).count()) {}

std::string LoopStats::name_of(const std::type_info& what) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(what.name(), nullptr, nullptr, &status),
                                               std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(what.name());
}

void LoopStats::slow(const char* kind, const std::type_info& what, int64_t ran_ns, int64_t now_ns) {
  slow_count_.inc();
  slow_in_iteration_ = true;
  if (now_ns - last_warn_ns_ < std::chrono::nanoseconds(kWarnInterval).count() && last_warn_ns_ != 0) {
    ++not_logged_;
    return;
  }
  warn(fmt::format("{} held {} for {:.1f} ms: {}", kind, reactor_name_, ms(ran_ns), name_of(what)), now_ns);
}

void LoopStats::iteration_ran(int64_t busy_ns, int64_t cpu_ns, int64_t now_ns) {
  busy_.observe(static_cast<double>(busy_ns) / 1e9);
  const bool named = slow_in_iteration_;
  slow_in_iteration_ = false;
  if (named || busy_ns < slow_ns_.load(std::memory_order_relaxed)) return;
  slow_count_.inc();
  if (now_ns - last_warn_ns_ < std::chrono::nanoseconds(kWarnInterval).count() && last_warn_ns_ != 0) {
    ++not_logged_;
    return;
  }
  warn(fmt::format("one loop iteration held {} for {:.1f} ms, {:.1f} ms of it on a CPU: I/O callbacks and short "
                   "tasks adding up, or a thread waiting for a core",
                   reactor_name_, ms(busy_ns), ms(std::min(cpu_ns, busy_ns))),
       now_ns);
}

void LoopStats::warn(const std::string& line, int64_t now_ns) {
  if (not_logged_ > 0) {
    MLOG_WARN("{} (and {} more slow callbacks on it since the last such line)", line, not_logged_);
  } else {
    MLOG_WARN("{}", line);
  }
  not_logged_ = 0;
  last_warn_ns_ = now_ns;
}

}  // namespace magnetar::runtime
