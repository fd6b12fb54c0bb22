// `magnetar perf disk <dir>`: the disk's own latency for a durable append
// stream, with no broker: the baseline a node's publish latency is
// compared with, measured on the same machine in the same run.
//
// Writes of --write-kib arrive at --rate-mib MiB/s, each due at a fixed
// time, and are made durable by a group commit and nothing else (no
// framing, no index, no queue): one thread appends every write that has
// come due to a file in <dir> in one call and another runs fdatasync; the
// next write waits for that sync unless 1 MiB more has come due.
// With --overlap, one thread appends each write as it comes due and
// another runs fdatasync over whatever has been written, again and again,
// so that writes land beside the syncs (ext4 makes those syncs slower;
// the journal avoids it below 1 MiB queued). A write's latency runs from
// its due time until an fdatasync that began after it was written
// returned, so a write that waits behind a slow sync, or behind a writer
// that fell behind, counts the wait. Printed: that latency's percentiles
// and the fdatasync calls' own.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "client/histogram.h"

namespace magnetar::cli {
namespace perf_disk {

using Clock = std::chrono::steady_clock;

struct DiskArgs {
  std::string dir = ".";
  double rate_mib = 100;  // MiB/s arriving
  double write_kib = 128;
  double time_s = 10;
  double interval_s = 1;
  bool overlap = false;
  bool json = false;
};

struct DiskFigures {
  client::Histogram durable;  // µs, due -> covered by an fdatasync
  client::Histogram fsync;    // µs per fdatasync call
  uint64_t writes = 0;
  uint64_t bytes = 0;
  std::string error;
};

double ms(uint64_t us) { return static_cast<double>(us) / 1000.0; }

nlohmann::json disk_percentiles(const client::Histogram& h) {
  return {{"p50", ms(h.percentile(50))},      {"p99", ms(h.percentile(99))}, {"p99_9", ms(h.percentile(99.9))},
          {"max", ms(h.max())},               {"count", h.count()}};
}

std::string disk_line(const client::Histogram& h) {
  return fmt::format("p50 {:.2f}  p99 {:.2f}  p99.9 {:.2f}  max {:.2f}", ms(h.percentile(50)), ms(h.percentile(99)),
                     ms(h.percentile(99.9)), ms(h.max()));
}

int run_disk(const DiskArgs& a) {
  const std::string path = a.dir + "/.magnetar-perf-disk-latency";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::fprintf(stderr, "cannot write in %s: %s\n", a.dir.c_str(), std::strerror(errno));
    return 1;
  }
  const size_t write_bytes = std::max<size_t>(1, static_cast<size_t>(a.write_kib * 1024));
  const double per_write_s = static_cast<double>(write_bytes) / (a.rate_mib * 1024 * 1024);
  const std::string data(write_bytes, 'd');

  // The writer publishes each write's due time; the syncer covers them.
  std::mutex mu;
  std::condition_variable cv;
  // Due times of the writes done and not yet covered by an fdatasync, in
  // order (without --overlap the writer waits until it is empty).
  std::deque<Clock::time_point> unsynced;
  bool writer_done = false;
  DiskFigures all;
  client::Histogram interval_durable;

  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.time_s));
  auto due_at = [&](uint64_t i) {
    return start + std::chrono::duration_cast<Clock::duration>(
                       std::chrono::duration<double>(per_write_s * static_cast<double>(i)));
  };
  uint64_t offset = 0;  // the writer's
  // Appends `bytes`, writes first..first+count-1, and publishes their due
  // times; false (the error set) when the write failed. Locks `lock`.
  auto append = [&](const std::string& bytes, uint64_t first, uint64_t count, std::unique_lock<std::mutex>& lock) {
    ssize_t w = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    lock.lock();
    if (w != static_cast<ssize_t>(bytes.size())) {
      all.error = fmt::format("write failed: {}", w < 0 ? std::strerror(errno) : "short write");
      return false;
    }
    offset += bytes.size();
    for (uint64_t k = 0; k < count; ++k) unsynced.push_back(due_at(first + k));
    cv.notify_all();
    return true;
  };
  std::thread writer([&] {
    if (!a.overlap) {
      // Every write due so far in one call (at most 1 MiB), then wait for
      // the fdatasync that covers it before the next, unless 1 MiB more has
      // come due meanwhile: the journal's rule (sync_exclusive_bytes).
      const uint64_t per_mib = std::max<uint64_t>(1, (uint64_t{1} << 20) / write_bytes);
      std::string pending;
      for (uint64_t i = 0; due_at(i) < end;) {
        std::this_thread::sleep_until(due_at(i));
        const auto now = Clock::now();
        uint64_t n = 0;
        while (due_at(i + n) <= now && due_at(i + n) < end && n < per_mib) ++n;
        pending.clear();
        for (uint64_t k = 0; k < n; ++k) pending.append(data);
        std::unique_lock lock(mu, std::defer_lock);
        if (!append(pending, i, n, lock)) break;
        i += n;
        cv.wait_until(lock, due_at(i + per_mib - 1),
                      [&] { return unsynced.empty() || !all.error.empty(); });
        if (!all.error.empty()) break;
      }
    } else {
      for (uint64_t i = 0; due_at(i) < end; ++i) {
        std::this_thread::sleep_until(due_at(i));
        std::unique_lock lock(mu, std::defer_lock);
        if (!append(data, i, 1, lock)) break;
      }
    }
    std::lock_guard lock(mu);
    writer_done = true;
    cv.notify_all();
  });

  uint64_t covered = 0;  // writes an fdatasync has covered
  auto next_report = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.interval_s));
  uint64_t interval_writes = 0;
  for (;;) {
    size_t taken;  // the writes this fdatasync covers: those done before it began
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return writer_done || !unsynced.empty(); });
      if (unsynced.empty() && writer_done) break;
      taken = unsynced.size();
    }
    const auto t0 = Clock::now();
    if (::fdatasync(fd) != 0) {
      std::lock_guard lock(mu);
      all.error = fmt::format("fdatasync failed: {}", std::strerror(errno));
      cv.notify_all();
      break;
    }
    const auto t1 = Clock::now();
    all.fsync.record(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(t1 - t0).count()));
    {
      std::lock_guard lock(mu);
      for (size_t i = 0; i < taken; ++i) {
        const auto us = static_cast<uint64_t>(std::max<int64_t>(
            0, std::chrono::duration_cast<std::chrono::microseconds>(t1 - unsynced.front()).count()));
        unsynced.pop_front();
        all.durable.record(us);
        interval_durable.record(us);
      }
      cv.notify_all();
    }
    interval_writes += taken;
    covered += taken;
    if (!a.json && t1 >= next_report) {
      std::printf("[%6.1fs] disk  %6.0f writes/s  %7.1f MiB/s | write -> durable ms %s\n",
                  std::chrono::duration<double>(t1 - start).count(),
                  static_cast<double>(interval_writes) / a.interval_s,
                  static_cast<double>(interval_writes * write_bytes) / a.interval_s / (1024 * 1024),
                  disk_line(interval_durable).c_str());
      std::fflush(stdout);
      interval_durable.reset();
      interval_writes = 0;
      next_report += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.interval_s));
    }
  }
  writer.join();
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  ::close(fd);
  ::unlink(path.c_str());
  all.writes = covered;
  all.bytes = covered * write_bytes;
  if (!all.error.empty()) {
    std::fprintf(stderr, "%s\n", all.error.c_str());
    return 1;
  }
  if (a.json) {
    nlohmann::json out = {{"dir", a.dir},
                          {"write_bytes", write_bytes},
                          {"rate_mib_per_s", a.rate_mib},
                          {"overlap", a.overlap},
                          {"writes", all.writes},
                          {"mib_per_s", secs > 0 ? static_cast<double>(all.bytes) / secs / (1024 * 1024) : 0},
                          {"write_to_durable_ms", disk_percentiles(all.durable)},
                          {"fdatasync_ms", disk_percentiles(all.fsync)}};
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf("Summary: %.0f KiB writes at %.1f MiB/s into %s, %s\n", static_cast<double>(write_bytes) / 1024,
              a.rate_mib, a.dir.c_str(),
              a.overlap ? "one thread writing and one running fdatasync beside it"
                        : "what came due written, then fdatasync, and again");
  std::printf("  %llu writes in %.1f s: %.1f MiB/s, %llu fdatasyncs\n", static_cast<unsigned long long>(all.writes),
              secs, secs > 0 ? static_cast<double>(all.bytes) / secs / (1024 * 1024) : 0,
              static_cast<unsigned long long>(all.fsync.count()));
  std::printf("  write -> durable ms   %s\n", disk_line(all.durable).c_str());
  std::printf("  fdatasync ms          %s\n", disk_line(all.fsync).c_str());
  return 0;
}

}  // namespace perf_disk

void add_perf_disk_command(CLI::App* perf, Command& run) {
  auto args = std::make_shared<perf_disk::DiskArgs>();
  auto* d = perf->add_subcommand(
      "disk", "The disk alone: writes arriving at a rate made durable by a group commit (no broker); latency from "
              "each write's due time until an fdatasync covered it");
  d->add_option("dir", args->dir, "Directory to write in (the node's data directory, for a fair comparison)")
      ->capture_default_str()
      ->check(CLI::ExistingDirectory);
  d->add_option("--rate-mib", args->rate_mib, "MiB per second arriving")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 100000.0));
  d->add_option("--write-kib", args->write_kib, "KiB per write (a journal's write per group commit)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 65536.0));
  d->add_option("-t,--time", args->time_s, "Seconds to run")->capture_default_str()->check(CLI::Range(0.1, 86400.0));
  d->add_option("--interval", args->interval_s, "Seconds between progress lines")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  d->add_flag("--overlap", args->overlap,
              "Append each write as it comes due from one thread while another runs fdatasync (writes beside syncs)");
  d->add_flag("--json", args->json, "Print one JSON object with the figures instead of progress lines");
  d->callback([&run, args]() { run = [args]() { return perf_disk::run_disk(*args); }; });
}

}  // namespace magnetar::cli
