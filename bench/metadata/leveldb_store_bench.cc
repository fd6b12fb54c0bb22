// Metadata store cost as callers see it: a blocking call from another thread,
// so each number includes the hand-off to the metadata thread and back.
//
//   build/bench/metadata/leveldb_store_bench [--benchmark_filter=Put]
//
// Writes fdatasync before they are acknowledged (sync_writes), so Put/Sync
// measures the disk; Put/NoSync the rest of the path.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>

#include "metadata/blocking.h"
#include "metadata/leveldb_store.h"

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
