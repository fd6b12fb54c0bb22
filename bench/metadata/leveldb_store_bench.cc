// Metadata store cost as callers see it: a blocking call from another thread,
// so each number includes the hand-off to the metadata thread and back.
//
//   build/bench/metadata/leveldb_store_bench [--benchmark_filter=Put]
//
// Writes fdatasync before they are acknowledged (sync_writes), so Put/Sync
// measures the disk; Put/NoSync the rest of the path. ConcurrentPut has many
// puts waiting at once, issued from reactors as the broker does;
// batches_per_op is the number of LevelDB write batches (one fdatasync each)
// per put.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <latch>

#include "common/metrics.h"
#include "metadata/blocking.h"
#include "metadata/leveldb_store.h"
#include "runtime/reactor.h"

namespace magnetar::metadata {
namespace {

class StoreFixture {
 public:
  explicit StoreFixture(bool sync) {
    dir_ = std::filesystem::temp_directory_path() / ("magnetar-metadata-bench-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    LevelDbStore::Options o;
    o.path = dir_.string();
    o.sync_writes = sync;
    store_ = std::make_unique<LevelDbStore>(o);
    if (!store_->start().is_ok()) std::abort();
  }
  ~StoreFixture() {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  Store& store() { return *store_; }

 private:
  std::filesystem::path dir_;
  std::unique_ptr<LevelDbStore> store_;
};

void BM_Put(benchmark::State& state) {
  StoreFixture f(state.range(0) != 0);
  std::string value(256, 'v');
  int64_t i = 0;
  for (auto _ : state) {
    auto r = blocking::put(f.store(), "/bench/k" + std::to_string(i++ % 1000), value);
    if (!r.is_ok()) state.SkipWithError(r.status().to_string().c_str());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Put)->ArgName("sync")->Arg(1)->Arg(0)->UseRealTime();

// `callers` reactors each keep `in_flight` puts outstanding, issuing the next
// from the callback of the last (thousands of topics opening at once, every
// cursor acknowledgement persisted). Synced writes.
void BM_ConcurrentPut(benchmark::State& state) {
  constexpr int64_t kPutsPerIteration = 4096;
  const auto callers = static_cast<size_t>(state.range(0));
  const int64_t in_flight = state.range(1);  // callers * in_flight <= kPutsPerIteration
  StoreFixture f(true);
  std::vector<std::unique_ptr<runtime::Reactor>> reactors;
  for (size_t r = 0; r < callers; ++r) {
    reactors.push_back(std::make_unique<runtime::Reactor>(r, "bench-" + std::to_string(r)));
    reactors.back()->start();
  }
  auto& batches = common::MetricsRegistry::global().counter("magnetar_metadata_write_batches_total", "");
  const uint64_t batches_before = batches.value();
  const std::string value(256, 'v');
  std::atomic<bool> failed{false};
  for (auto _ : state) {
    std::atomic<int64_t> to_issue{kPutsPerIteration};
    std::latch answered(kPutsPerIteration);
    // Runs on reactor r: issues one put whose callback, back on r, issues the next.
    std::function<void(size_t)> issue = [&](size_t r) {
      int64_t n = to_issue.fetch_sub(1);
      if (n <= 0) return;
      f.store().put("/bench/r" + std::to_string(r) + "/k" + std::to_string(n % 1000), value, {},
                    [&, r](common::Result<Stat> st) {
                      if (!st.is_ok()) failed.store(true);
                      issue(r);
                      answered.count_down();  // last: the iteration may end right after
                    });
    };
    for (size_t r = 0; r < callers; ++r) {
      for (int64_t i = 0; i < in_flight; ++i) {
        if (!reactors[r]->post([&issue, r]() { issue(r); }).is_ok()) std::abort();
      }
    }
    answered.wait();
  }
  for (auto& r : reactors) r->stop();
  if (failed.load()) state.SkipWithError("a put failed");
  const auto ops = static_cast<double>(state.iterations() * kPutsPerIteration);
  state.SetItemsProcessed(state.iterations() * kPutsPerIteration);
  state.counters["batches_per_op"] = static_cast<double>(batches.value() - batches_before) / ops;
}
BENCHMARK(BM_ConcurrentPut)
    ->ArgNames({"reactors", "in_flight"})
    ->Args({1, 1})
    ->Args({2, 16})
    ->Args({2, 256})
    ->Args({8, 256})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_CompareAndSet(benchmark::State& state) {
  StoreFixture f(false);
  auto created = blocking::put(f.store(), "/bench/cas", "0", {kMustNotExist});
  int64_t version = created->version;
  for (auto _ : state) {
    auto r = blocking::put(f.store(), "/bench/cas", "x", {version});
    if (!r.is_ok()) state.SkipWithError(r.status().to_string().c_str());
    version = r->version;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CompareAndSet)->UseRealTime();

void BM_Get(benchmark::State& state) {
  StoreFixture f(false);
  for (int i = 0; i < 1000; ++i) (void)blocking::put(f.store(), "/bench/k" + std::to_string(i), std::string(256, 'v'));
  int64_t i = 0;
  for (auto _ : state) {
    auto r = blocking::get(f.store(), "/bench/k" + std::to_string(i++ % 1000));
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Get)->UseRealTime();

void BM_ListChildren(benchmark::State& state) {
  StoreFixture f(false);
  for (int64_t i = 0; i < state.range(0); ++i) {
    (void)blocking::put(f.store(), "/bench/ns/t" + std::to_string(i), "v");
    (void)blocking::put(f.store(), "/bench/ns/t" + std::to_string(i) + "/deeper", "v");
  }
  for (auto _ : state) {
    auto r = blocking::list_children(f.store(), "/bench/ns");
    if (!r.is_ok() || static_cast<int64_t>(r->size()) != state.range(0)) state.SkipWithError("wrong listing");
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ListChildren)->ArgName("children")->Arg(10)->Arg(1000)->UseRealTime();

}  // namespace
}  // namespace magnetar::metadata

BENCHMARK_MAIN();
