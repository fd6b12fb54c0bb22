// Storage benchmarks: append throughput per entry size, ledger count and
// fsync mode; tail reads (cache) and catch-up reads (disk, read-ahead), one
// reader and several at once; appends while segment compaction runs.
//
// The first benchmark measures the disk itself: sequential 1 MiB writes,
// each followed by fdatasync. Every append benchmark then reports
// `disk_ratio`: its payload bytes per second over that raw figure.
// Files go to $MAGNETAR_BENCH_DIR (default: the temporary directory).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "common/metrics.h"
#include "storage/segment.h"
#include "storage/storage.h"

namespace magnetar::storage {
namespace {

using common::Slice;
using common::Status;
using Clock = std::chrono::steady_clock;

double g_disk_bytes_per_second = 0;

class BenchDir {
 public:
  BenchDir() {
    const char* base = std::getenv("MAGNETAR_BENCH_DIR");
    std::string tmpl = (base ? std::string(base) : std::filesystem::temp_directory_path().string()) +
                       "/magnetar-storage-bench-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~BenchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Waits for an asynchronous call with a bounded spin on an atomic flag.
template <typename T>
struct Waiter {
  std::atomic<bool> done{false};
  std::optional<T> value;
  void set(T v) {
    value.emplace(std::move(v));
    done.store(true, std::memory_order_release);
    done.notify_one();
  }
  T get() {
    done.wait(false, std::memory_order_acquire);
    return std::move(*value);
  }
};

LedgerWriter must_create(Storage& s, LedgerId id) {
  Waiter<common::Result<LedgerWriter>> w;
  s.create_ledger(id, [&](common::Result<LedgerWriter> r) { w.set(std::move(r)); });
  auto r = w.get();
  if (!r) std::abort();
  return *r;
}

// Keeps up to `window` adds in flight; completions run on the journal thread.
// When the window is full the submitter sleeps until half of it drained, so
// a wake-up costs one futex call per window/2 completions, not per add.
class Appender {
 public:
  Appender(Storage& s, size_t window) : storage_(s), window_(window) {}
  void add(const LedgerWriter& w, EntryId e, const Slice& data) {
    if (outstanding_.load(std::memory_order_acquire) >= window_) {
      for (size_t cur; (cur = outstanding_.load(std::memory_order_acquire)) > window_ / 2;) outstanding_.wait(cur);
    }
    outstanding_.fetch_add(1, std::memory_order_acq_rel);
    storage_.add_entry(w, e, data, [this](Status st) {
      if (!st.is_ok()) failed_.store(true);
      size_t left = outstanding_.fetch_sub(1, std::memory_order_acq_rel) - 1;
      if (left == window_ / 2 || left == 0) outstanding_.notify_all();
    });
  }
  void drain() {
    for (size_t cur; (cur = outstanding_.load(std::memory_order_acquire)) != 0;) outstanding_.wait(cur);
  }
  bool failed() const { return failed_.load(); }

 private:
  Storage& storage_;
  const size_t window_;
  std::atomic<size_t> outstanding_{0};
  std::atomic<bool> failed_{false};
};

StorageOptions bench_options(const std::string& dir, FsyncMode mode) {
  StorageOptions o;
  o.directory = dir;
  o.fsync_mode = mode;
  return o;
}

// The disk's own sequential bandwidth: `chunk` bytes per write(), each
// followed by fdatasync. Append ratios are taken against the best of these.
void BM_DiskSequentialWriteFdatasync(benchmark::State& state) {
  BenchDir dir;
  const size_t chunk = static_cast<size_t>(state.range(0));
  std::string path = dir.path() + "/raw";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char> buf(chunk, 'r');
  uint64_t written = 0;
  auto t0 = Clock::now();
  for (auto _ : state) {
    if (::write(fd, buf.data(), chunk) != static_cast<ssize_t>(chunk)) state.SkipWithError("write failed");
    if (::fdatasync(fd) != 0) state.SkipWithError("fdatasync failed");
    written += chunk;
  }
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ::close(fd);
  g_disk_bytes_per_second = std::max(g_disk_bytes_per_second, written / secs);
  state.counters["MiB_per_s"] = written / secs / (1 << 20);
}
BENCHMARK(BM_DiskSequentialWriteFdatasync)->Arg(1 << 20)->Iterations(512)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DiskSequentialWriteFdatasync)->Arg(4 << 20)->Iterations(128)->UseRealTime()->Unit(benchmark::kMillisecond);

// Args: entry size, ledgers, fsync mode (0 always, 2 never).
void BM_Append(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  const size_t ledgers = static_cast<size_t>(state.range(1));
  const auto mode = static_cast<FsyncMode>(state.range(2));
  BenchDir dir;
  auto storage = make_local_storage(bench_options(dir.path(), mode));
  if (!storage->start().is_ok()) return state.SkipWithError("start failed");
  std::vector<LedgerWriter> writers;
  std::vector<EntryId> next(ledgers, 0);
  for (size_t i = 0; i < ledgers; ++i) writers.push_back(must_create(*storage, i + 1));
  Slice payload = Slice::copy_of(std::string(size, 'p'));
  // In flight: enough for a few MiB per group commit.
  Appender appender(*storage, std::max<size_t>(64, std::min<size_t>(16384, (16u << 20) / size)));
  auto& registry = common::MetricsRegistry::global();
  auto& batches = registry.histogram("magnetar_storage_journal_batch_entries", "", {});
  auto& fsyncs = registry.histogram("magnetar_storage_journal_fsync_seconds", "", {});
  const uint64_t batches0 = batches.count(), fsyncs0 = fsyncs.count();
  const double batch_sum0 = batches.sum(), fsync_sum0 = fsyncs.sum();
  size_t i = 0;
  auto t0 = Clock::now();
  for (auto _ : state) {
    appender.add(writers[i], next[i]++, payload);
    if (++i == ledgers) i = 0;
  }
  appender.drain();
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (appender.failed()) state.SkipWithError("an add failed");
  double entries = static_cast<double>(state.iterations());
  state.counters["entries_per_s"] = entries / secs;
  state.counters["MiB_per_s"] = entries * size / secs / (1 << 20);
  if (batches.count() > batches0) {
    state.counters["batch_entries"] = (batches.sum() - batch_sum0) / (batches.count() - batches0);
  }
  if (fsyncs.count() > fsyncs0) {
    state.counters["fsync_ms"] = 1000 * (fsyncs.sum() - fsync_sum0) / (fsyncs.count() - fsyncs0);
  }
  if (g_disk_bytes_per_second > 0) state.counters["disk_ratio"] = entries * size / secs / g_disk_bytes_per_second;
  storage->stop();
}

constexpr int64_t kAlways = static_cast<int64_t>(FsyncMode::kAlways);
constexpr int64_t kNever = static_cast<int64_t>(FsyncMode::kNever);

// Iterations bound the bytes written per run (~256 MiB).
BENCHMARK(BM_Append)->Args({100, 1, kAlways})->Iterations(1000000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Append)->Args({1024, 1, kAlways})->Iterations(250000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Append)->Args({65536, 1, kAlways})->Iterations(4000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Append)->Args({100, 100, kAlways})->Iterations(1000000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Append)->Args({1024, 100, kAlways})->Iterations(250000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Append)->Args({65536, 100, kAlways})->Iterations(4000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Append)->Args({100, 1, kNever})->Iterations(2000000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Append)->Args({100, 100, kNever})->Iterations(2000000)->UseRealTime()->Unit(benchmark::kMillisecond);

// Fills one ledger with `count` entries of `size` bytes.
void fill(Storage& s, LedgerId id, EntryId count, size_t size) {
  LedgerWriter w = must_create(s, id);
  Slice payload = Slice::copy_of(std::string(size, 'q'));
  Appender appender(s, 4096);
  for (EntryId e = 0; e < count; ++e) appender.add(w, e, payload);
  appender.drain();
}

// Reads first..last, following short reads; returns bytes read.
size_t read_range(Storage& s, LedgerId id, EntryId first, EntryId last) {
  size_t bytes = 0;
  while (first <= last) {
    Waiter<common::Result<std::vector<Entry>>> w;
      s.read_entries(id, first, last, [&](common::Result<std::vector<Entry>> r) { w.set(std::move(r)); });
    auto r = w.get();
    if (!r || r->empty()) std::abort();
    for (const Entry& e : *r) bytes += e.data.size();
    first = r->back().id + 1;
  }
  return bytes;
}

// Tailing readers: what was just added, served from the tail cache.
void BM_TailRead(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  const EntryId count = 20000;
  const EntryId batch = 100;
  BenchDir dir;
  auto storage = make_local_storage(bench_options(dir.path(), FsyncMode::kNever));
  if (!storage->start().is_ok()) return state.SkipWithError("start failed");
  fill(*storage, 1, count, size);
  EntryId first = 0;
  size_t bytes = 0;
  for (auto _ : state) {
    bytes += read_range(*storage, 1, first, first + batch - 1);
    first = (first + batch) % count;
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.SetItemsProcessed(state.iterations() * batch);
  storage->stop();
}
BENCHMARK(BM_TailRead)->Arg(1024)->UseRealTime();

// Catch-up readers: old entries not in any cache, read from disk (page
// cache dropped for the segment files) with read-ahead.
void BM_CatchUpRead(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  const EntryId count = static_cast<EntryId>((256u << 20) / size);
  BenchDir dir;
  StorageOptions o = bench_options(dir.path(), FsyncMode::kNever);
  o.tail_cache_bytes = 0;
  o.read_threads = static_cast<size_t>(state.range(1));
  size_t bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    {
      auto writer = make_local_storage(o);
      if (!writer->start().is_ok()) return state.SkipWithError("start failed");
      if (!writer->ledger_info(1).is_ok()) fill(*writer, 1, count, size);
      writer->stop();
    }
    std::string segments = dir.path() + "/segments";
    for (uint64_t id : list_segments(segments).value_or({})) {
      int fd = ::open(segment_path(segments, id).c_str(), O_RDONLY);
      ::fdatasync(fd);
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      ::close(fd);
    }
    auto storage = make_local_storage(o);
    if (!storage->start().is_ok()) return state.SkipWithError("start failed");
    state.ResumeTiming();
    bytes += read_range(*storage, 1, 0, count - 1);
    state.PauseTiming();
    storage->stop();
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.SetItemsProcessed(state.iterations() * count);
}
BENCHMARK(BM_CatchUpRead)
    ->ArgNames({"size", "read_threads"})
    ->Args({1024, 4})
    ->Args({1024, 1})
    ->Iterations(3)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Several catch-up readers at once, each reading 100 entries per call as a
// dispatcher does: on separate ledgers (args: readers, 0, read threads) or
// at different places in one ledger (readers, 1, read threads). Page cache
// dropped for the segment files first.
void BM_CatchUpReaders(benchmark::State& state) {
  const size_t size = 1024;
  const int readers = static_cast<int>(state.range(0));
  const bool one_ledger = state.range(1) != 0;
  const EntryId total = static_cast<EntryId>((256u << 20) / size);
  BenchDir dir;
  StorageOptions o = bench_options(dir.path(), FsyncMode::kNever);
  o.tail_cache_bytes = 0;
  o.read_threads = static_cast<size_t>(state.range(2));
  {
    auto writer = make_local_storage(o);
    if (!writer->start().is_ok()) return state.SkipWithError("start failed");
    if (one_ledger) {
      fill(*writer, 1, total, size);
    } else {
      for (int r = 0; r < readers; ++r) fill(*writer, static_cast<LedgerId>(r + 1), total / readers, size);
    }
    writer->stop();
  }
  std::atomic<size_t> bytes{0};
  for (auto _ : state) {
    state.PauseTiming();
    std::string segments = dir.path() + "/segments";
    for (uint64_t id : list_segments(segments).value_or({})) {
      int fd = ::open(segment_path(segments, id).c_str(), O_RDONLY);
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      ::close(fd);
    }
    auto storage = make_local_storage(o);
    if (!storage->start().is_ok()) return state.SkipWithError("start failed");
    state.ResumeTiming();
    std::vector<std::thread> threads;
    const EntryId share = total / readers;
    for (int r = 0; r < readers; ++r) {
      threads.emplace_back([&, r]() {
        const LedgerId id = one_ledger ? 1 : static_cast<LedgerId>(r + 1);
        const EntryId from = one_ledger ? r * share : 0;
        for (EntryId first = from; first < from + share; first += 100) {
          bytes += read_range(*storage, id, first, std::min(first + 99, from + share - 1));
        }
      });
    }
    for (auto& t : threads) t.join();
    state.PauseTiming();
    storage->stop();
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes.load()));
}
BENCHMARK(BM_CatchUpReaders)
    ->ArgNames({"readers", "one_ledger", "read_threads"})
    ->Args({4, 0, 1})
    ->Args({4, 0, 4})
    ->Args({2, 1, 1})
    ->Args({2, 1, 4})
    ->Iterations(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Segment compaction. Setup (untimed): 32 segments of 8 MiB of 1 KiB
// entries, `live_percent` of them in one long-lived ledger and the rest in
// ledgers that are then deleted, which leaves every segment pinned by the
// long-lived one. Timed: 128 MiB of fsync=always appends to a new ledger,
// started as the deletes land, with compaction on (ratio 0.5) or off.
// Reports the disk before and once compaction is done, how long it took,
// and the appends' throughput while it ran.
uint64_t segment_bytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(dir + "/segments", ec)) total += f.file_size(ec);
  return total;
}

void BM_AppendWhileCompacting(benchmark::State& state) {
  const bool compact = state.range(0) != 0;
  const int live_percent = static_cast<int>(state.range(1));
  constexpr uint64_t kSegmentSize = 8u << 20;
  constexpr size_t kEntrySize = 1024;
  constexpr EntryId kSetupEntries = 32 * (kSegmentSize / (kEntrySize + 25));
  constexpr EntryId kTimedEntries = (128u << 20) / kEntrySize;
  auto& compacted = common::MetricsRegistry::global().counter("magnetar_storage_compacted_bytes_total", "");
  for (auto _ : state) {
    state.PauseTiming();
    BenchDir dir;
    StorageOptions o = bench_options(dir.path(), FsyncMode::kAlways);
    o.segment_size = kSegmentSize;
    o.compact_ratio = compact ? 0.5 : 0;
    auto storage = make_local_storage(o);
    if (!storage->start().is_ok()) return state.SkipWithError("start failed");
    LedgerWriter kept = must_create(*storage, 1);
    std::vector<LedgerWriter> churn;
    for (LedgerId id = 2; id < 10; ++id) churn.push_back(must_create(*storage, id));
    Slice payload = Slice::copy_of(std::string(kEntrySize, 'c'));
    {
      Appender appender(*storage, 4096);
      std::vector<EntryId> next(churn.size(), 0);
      EntryId kept_next = 0;
      for (EntryId i = 0; i < kSetupEntries; ++i) {
        if (i % 100 < live_percent) {
          appender.add(kept, kept_next++, payload);
        } else {
          const size_t c = static_cast<size_t>(i) % churn.size();
          appender.add(churn[c], next[c]++, payload);
        }
      }
      appender.drain();
    }
    const uint64_t disk_before = segment_bytes(dir.path());
    const uint64_t compacted_before = compacted.value();
    LedgerWriter timed = must_create(*storage, 100);
    state.ResumeTiming();
    const auto t0 = Clock::now();
    // When the copied bytes last grew: compaction's end, to 5 ms.
    std::atomic<bool> sampling{true};
    std::atomic<int64_t> last_copy_ms{0};
    std::thread sampler([&] {
      uint64_t seen = compacted.value();
      while (sampling) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        const uint64_t now = compacted.value();
        if (now == seen) continue;
        seen = now;
        last_copy_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
      }
    });
    for (const LedgerWriter& w : churn) {
      storage->delete_ledger(w.ledger, [](Status) {});
    }
    Appender appender(*storage, 4096);
    for (EntryId e = 0; e < kTimedEntries; ++e) appender.add(timed, e, payload);
    appender.drain();
    const double append_secs = std::chrono::duration<double>(Clock::now() - t0).count();
    state.PauseTiming();
    // Compaction done: the copied bytes stop growing (bounded wait).
    uint64_t last = compacted.value();
    for (int quiet = 0, i = 0; compact && quiet < 20 && i < 6000; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      const uint64_t now = compacted.value();
      quiet = now == last ? quiet + 1 : 0;
      last = now;
    }
    sampling = false;
    sampler.join();
    const double compact_secs = static_cast<double>(last_copy_ms.load()) / 1000;
    if (appender.failed()) state.SkipWithError("an add failed");
    // The timed ledger's own 128 MiB is not part of the before/after picture.
    const uint64_t timed_bytes = static_cast<uint64_t>(kTimedEntries) * (kEntrySize + 25);
    state.counters["disk_before_MiB"] = static_cast<double>(disk_before) / (1 << 20);
    state.counters["disk_after_MiB"] =
        static_cast<double>(segment_bytes(dir.path()) - std::min(timed_bytes, segment_bytes(dir.path()))) / (1 << 20);
    state.counters["copied_MiB"] = static_cast<double>(compacted.value() - compacted_before) / (1 << 20);
    state.counters["compact_s"] = compact ? compact_secs : 0;
    state.counters["append_MiB_per_s"] = static_cast<double>(kTimedEntries) * kEntrySize / append_secs / (1 << 20);
    storage->stop();
    state.ResumeTiming();
  }
}
BENCHMARK(BM_AppendWhileCompacting)
    ->ArgNames({"compact", "live_percent"})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({0, 40})
    ->Args({1, 40})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace magnetar::storage

int main(int argc, char** argv) {
  (void)magnetar::common::init_logging("warn");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
