#include "server/stall_probe.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "common/logging.h"
#include "common/stage_timing.h"

namespace magnetar::server {

namespace {

constexpr int64_t kWarnEveryNs = 10'000'000'000;

common::Histogram& stall_histogram(const char* part) {
  return common::MetricsRegistry::global().histogram(
      "magnetar_node_stall_seconds",
      "How late a probe thread woke from a timed sleep (late), split into waiting for a core on this machine "
      "(run_queue) and the machine not running it at all (absent: another guest, a paused VM or process)",
      common::stage_latency_bounds(), {{"part", part}});
}

}  // namespace

StallProbe::Split StallProbe::split(int64_t late, int64_t run_delay) {
  late = std::max<int64_t>(late, 0);
  if (run_delay < 0) return Split{0, late};
  const int64_t queued = std::min(run_delay, late);
  return Split{queued, late - queued};
}

StallProbe::StallProbe(Options options)
    : options_(options),
      late_(stall_histogram("late")),
      run_queue_(stall_histogram("run_queue")),
      absent_(stall_histogram("absent")) {}

StallProbe::~StallProbe() { stop(); }

void StallProbe::start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] {
    common::set_thread_name("stall-probe");
    run();
  });
}

void StallProbe::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int64_t StallProbe::run_delay_ns() {
  if (schedstat_fd_ < 0) return -1;
  // "<ns on a CPU> <ns waiting on a run queue> <time slices>"
  char buf[96];
  ssize_t n = ::pread(schedstat_fd_, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return -1;
  buf[n] = '\0';
  char* end = nullptr;
  std::strtoll(buf, &end, 10);
  if (end == buf) return -1;
  char* at = end;
  long long delay = std::strtoll(at, &end, 10);
  return end == at ? -1 : static_cast<int64_t>(delay);
}

void StallProbe::observe(int64_t late_ns, int64_t run_delay_ns, int64_t now_ns) {
  const Split s = split(late_ns, run_delay_ns);
  late_.observe(static_cast<double>(s.run_queue + s.absent) / 1e9);
  run_queue_.observe(static_cast<double>(s.run_queue) / 1e9);
  absent_.observe(static_cast<double>(s.absent) / 1e9);
  if (s.run_queue + s.absent < std::chrono::nanoseconds(options_.warn_at).count()) return;
  if (last_warn_ns_ != 0 && now_ns - last_warn_ns_ < kWarnEveryNs) {
    ++unwarned_;
    return;
  }
  last_warn_ns_ = now_ns;
  MLOG_WARN("node stalled: a thread ready to run waited {:.1f} ms ({:.1f} ms for a core on this machine, {:.1f} ms "
            "with the machine not running it){}",
            static_cast<double>(s.run_queue + s.absent) / 1e6, static_cast<double>(s.run_queue) / 1e6,
            static_cast<double>(s.absent) / 1e6,
            unwarned_ > 0 ? " (and " + std::to_string(unwarned_) + " more stalls since the last such line)"
                          : std::string());
  unwarned_ = 0;
}

std::chrono::milliseconds StallProbe::next_interval(std::chrono::steady_clock::time_point now) {
  if (!options_.activity) return options_.interval;
  if (now - window_start_ >= std::chrono::seconds(1)) {
    const uint64_t activity = options_.activity();
    const double secs = std::chrono::duration<double>(now - window_start_).count();
    working_ = static_cast<double>(activity - window_activity_) >= static_cast<double>(kActiveIterations) * secs;
    window_activity_ = activity;
    window_start_ = now;
  }
  return working_ ? options_.interval : options_.idle_interval;
}

void StallProbe::run() {
  // The kernel may fire a sleeper's timer up to its slack late (50 us by
  // default): none, so that lateness is the machine's.
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  schedstat_fd_ = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  window_start_ = std::chrono::steady_clock::now();
  if (options_.activity) window_activity_ = options_.activity();
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const int64_t delay_before = run_delay_ns();
    const auto now = std::chrono::steady_clock::now();
    const auto deadline = now + next_interval(now);
    if (cv_.wait_until(lock, deadline, [this] { return stopping_; })) break;
    const auto woke = std::chrono::steady_clock::now();
    const int64_t delay_after = run_delay_ns();
    const int64_t run_delay = delay_before >= 0 && delay_after >= 0 ? delay_after - delay_before : -1;
    observe(std::chrono::duration_cast<std::chrono::nanoseconds>(woke - deadline).count(), run_delay,
            common::monotonic_ns());
  }
  if (schedstat_fd_ >= 0) ::close(schedstat_fd_);
  schedstat_fd_ = -1;
}

}  // namespace magnetar::server
