#include "server/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace magnetar::server {
namespace {

const auto kStartSteady = std::chrono::steady_clock::now();
const auto kStartWall = std::chrono::system_clock::now();

double seconds_since_epoch(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

size_t open_fds() {
  size_t n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n > 3 ? n - 3 : 0;  // ".", ".." and the directory's own fd
}

}  // namespace

uint64_t resident_memory_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return static_cast<uint64_t>(resident) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

std::vector<uint64_t> register_process_metrics(common::MetricsRegistry& registry,
                                               runtime::Runtime& runtime, const std::string& version) {
  using common::MetricType;
  using common::SampleWriter;
  std::vector<uint64_t> ids;
  ids.push_back(registry.add_collector(
      "magnetar_build_info", "Build of this node; the value is always 1", MetricType::kGauge,
      [version](SampleWriter& w) { w.sample("magnetar_build_info", {{"version", version}}, 1); }));
  ids.push_back(registry.add_collector(
      "magnetar_uptime_seconds", "Seconds since this process started", MetricType::kGauge,
      [](SampleWriter& w) {
        w.sample("magnetar_uptime_seconds", {},
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - kStartSteady).count());
      }));
  ids.push_back(registry.add_collector(
      "process_start_time_seconds", "Start time of the process since the Unix epoch in seconds",
      MetricType::kGauge,
      [](SampleWriter& w) { w.sample("process_start_time_seconds", {}, seconds_since_epoch(kStartWall)); }));
  ids.push_back(registry.add_collector(
      "process_resident_memory_bytes", "Resident memory size in bytes", MetricType::kGauge,
      [](SampleWriter& w) {
        w.sample("process_resident_memory_bytes", {}, static_cast<double>(resident_memory_bytes()));
      }));
  ids.push_back(registry.add_collector(
      "process_cpu_seconds_total", "Total user and system CPU time spent in seconds",
      MetricType::kCounter, [](SampleWriter& w) {
        rusage ru{};
        getrusage(RUSAGE_SELF, &ru);
        double s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                   static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
        w.sample("process_cpu_seconds_total", {}, s);
      }));
  ids.push_back(registry.add_collector(
      "process_open_fds", "Number of open file descriptors", MetricType::kGauge,
      [](SampleWriter& w) { w.sample("process_open_fds", {}, static_cast<double>(open_fds())); }));
  ids.push_back(registry.add_collector(
      "magnetar_reactor_loop_lag_seconds",
      "Time a task posted to the reactor waits before it runs (last probe, or the age of an outstanding one)",
      MetricType::kGauge, [&runtime](SampleWriter& w) {
        for (size_t i = 0; i < runtime.size(); ++i) {
          auto& r = runtime.reactor(i);
          w.sample("magnetar_reactor_loop_lag_seconds", {{"reactor", std::to_string(i)}},
                   std::chrono::duration<double>(r.loop_lag()).count());
          r.probe_lag();  // measured for the next scrape
        }
      }));
  ids.push_back(registry.add_collector(
      "magnetar_reactor_mailbox_depth", "Tasks queued in the reactor's mailbox", MetricType::kGauge,
      [&runtime](SampleWriter& w) {
        for (size_t i = 0; i < runtime.size(); ++i) {
          w.sample("magnetar_reactor_mailbox_depth", {{"reactor", std::to_string(i)}},
                   static_cast<double>(runtime.reactor(i).mailbox_depth()));
        }
      }));
  return ids;
}

}  // namespace magnetar::server
