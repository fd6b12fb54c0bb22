// Cross-thread hand-off between reactors: latency of one hop and messages/s,
// against a mutex + condition-variable queue measured in the same run
// (`vs_condvar`: our rate over the baseline's; > 1 means faster).
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "runtime/reactor.h"
#include "runtime/task.h"

namespace {

using magnetar::runtime::Reactor;
using magnetar::runtime::Task;

double g_condvar_hop_rate = 0;      // hops/s of the baseline ping-pong
double g_condvar_message_rate = 0;  // messages/s of the baseline stream

// Two reactors bounce a token `hops` times; each hop is one post().
struct PingPong {
  Reactor a{0, "bench-a"};
  Reactor b{1, "bench-b"};
  std::promise<void> done;
  int remaining = 0;
  PingPong() {
    a.start();
    b.start();
  }
  ~PingPong() {
    b.stop();
    a.stop();
  }
  void hop(Reactor& to, Reactor& other) {
    (void)to.post([this, &to, &other]() {
      if (--remaining == 0) {
        done.set_value();
      } else {
        hop(other, to);
      }
    });
  }
  void run(int hops) {
    done = std::promise<void>();
    remaining = hops;
    auto fut = done.get_future();
    hop(a, b);
    fut.wait();
  }
};

void BM_ReactorHop(benchmark::State& state) {
  PingPong pp;
  constexpr int kHops = 20000;
  for (auto _ : state) pp.run(kHops);
  state.SetItemsProcessed(state.iterations() * kHops);
  // Inverted rate: seconds per hop (printed with an SI suffix, u = microseconds).
  state.counters["seconds_per_hop"] = benchmark::Counter(
      static_cast<double>(state.iterations() * kHops), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  if (g_condvar_hop_rate > 0) {
    state.counters["vs_condvar"] = benchmark::Counter(
        static_cast<double>(state.iterations() * kHops) / g_condvar_hop_rate, benchmark::Counter::kIsRate);
  }
}

// One producer thread streams `n` tasks into a reactor; the last one signals.
void BM_ReactorStream(benchmark::State& state) {
  Reactor r(0, "bench-r", 1 << 16);
  r.start();
  constexpr int kMessages = 200000;
  long sink = 0;
  for (auto _ : state) {
    std::promise<void> done;
    for (int i = 0; i < kMessages - 1; ++i) r.post_or_wait([&sink]() { ++sink; });
    r.post_or_wait([&done]() { done.set_value(); });
    done.get_future().wait();
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations() * kMessages);
  if (g_condvar_message_rate > 0) {
    state.counters["vs_condvar"] = benchmark::Counter(
        static_cast<double>(state.iterations() * kMessages) / g_condvar_message_rate,
        benchmark::Counter::kIsRate);
  }
  r.stop();
}

// Baseline: the textbook queue, a mutex-guarded deque and a condition
// variable, consumed by one thread.
class CondvarQueue {
 public:
  void push(Task t) {
    {
      std::lock_guard lock(mu_);
      q_.push_back(std::move(t));
    }
    cv_.notify_one();
  }
  Task pop() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return !q_.empty(); });
    Task t = std::move(q_.front());
    q_.pop_front();
    return t;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> q_;
};

struct CondvarWorker {
  CondvarQueue q;
  std::atomic<bool> stop{false};
  std::thread thread{[this]() {
    while (!stop.load()) q.pop()();
  }};
  ~CondvarWorker() {
    q.push([this]() { stop.store(true); });
    thread.join();
  }
};

void measure_condvar_baselines() {
  {
    CondvarWorker a, b;
    constexpr int kHops = 100000;
    std::promise<void> done;
    std::atomic<int> remaining{kHops};
    std::function<void(CondvarWorker&, CondvarWorker&)> hop = [&](CondvarWorker& to, CondvarWorker& other) {
      to.q.push([&]() {
        if (remaining.fetch_sub(1) == 1) {
          done.set_value();
        } else {
          hop(other, to);
        }
      });
    };
    auto t0 = std::chrono::steady_clock::now();
    hop(a, b);
    done.get_future().wait();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    g_condvar_hop_rate = kHops / secs;
  }
  {
    CondvarWorker w;
    constexpr int kMessages = 1000000;
    long sink = 0;
    std::promise<void> done;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kMessages - 1; ++i) w.q.push([&sink]() { ++sink; });
    w.q.push([&done]() { done.set_value(); });
    done.get_future().wait();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    benchmark::DoNotOptimize(sink);
    g_condvar_message_rate = kMessages / secs;
  }
}

BENCHMARK(BM_ReactorHop)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReactorStream)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  measure_condvar_baselines();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
