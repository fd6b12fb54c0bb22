// Pulsar frame codec throughput for SEND frames with 100 B and 1 KiB payloads:
// frames/s and bytes/s (whole frames), against memcpy of the same number of
// bytes measured in the same run (`memcpy_ratio`: codec speed over copy speed;
// 1.0 means handling a frame costs as much as copying its bytes once).
//   Decode:      one frame per read, checksum checked, metadata parsed.
//   Encode:      command, metadata, payload and CRC32C into one buffer.
//   MessageHead: the head of a MESSAGE frame, written before a stored entry
//                (writev), so its cost does not grow with the payload.
#include <benchmark/benchmark.h>

#include <time.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "protocol/pulsar/commands.h"
#include "protocol/pulsar/frame.h"

namespace {

using namespace magnetar::protocol::pulsar;
using magnetar::common::Slice;
using magnetar::common::SliceChain;

std::map<int64_t, double> g_memcpy_bytes_per_second;  // by payload size

proto::BaseCommand send_command() {
  proto::BaseCommand c;
  c.set_type(proto::BaseCommand::SEND);
  c.mutable_send()->set_producer_id(3);
  c.mutable_send()->set_sequence_id(123456);
  return c;
}

proto::MessageMetadata message_metadata() {
  proto::MessageMetadata m;
  m.set_producer_name("standalone-0-42");
  m.set_sequence_id(123456);
  m.set_publish_time(1700000000000);
  return m;
}

std::string payload(size_t n) {
  std::string p(n, '\0');
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<char>(i * 31 + 7);
  return p;
}

size_t send_frame_size(size_t payload_size) {
  return encode_payload_command(send_command(), message_metadata(), payload(payload_size)).size();
}

void report(benchmark::State& state, size_t frame_size) {
  // The baseline copied a SEND frame of this payload size; other frames of the
  // same payload differ from it by a few bytes.
  const auto iterations = static_cast<double>(state.iterations());
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(frame_size));
  state.counters["frame_bytes"] = static_cast<double>(frame_size);
  auto it = g_memcpy_bytes_per_second.find(state.range(0));
  if (it != g_memcpy_bytes_per_second.end()) {
    state.counters["memcpy_ratio"] = benchmark::Counter(
        iterations * static_cast<double>(frame_size) / it->second, benchmark::Counter::kIsRate);
  }
}

void BM_DecodeSend(benchmark::State& state) {
  Slice frame = encode_payload_command(send_command(), message_metadata(),
                                       payload(static_cast<size_t>(state.range(0))));
  FrameDecoder decoder;
  Frame out;
  SliceChain input;
  for (auto _ : state) {
    input.append(frame);
    if (decoder.decode(input, &out) != DecodeResult::kFrame) {
      state.SkipWithError("decode failed");
      break;
    }
    benchmark::DoNotOptimize(out.payload.data());
  }
  report(state, frame.size());
}

void BM_EncodeSend(benchmark::State& state) {
  const auto command = send_command();
  const auto metadata = message_metadata();
  const std::string body = payload(static_cast<size_t>(state.range(0)));
  size_t frame_size = 0;
  for (auto _ : state) {
    Slice frame = encode_payload_command(command, metadata, body);
    frame_size = frame.size();
    benchmark::DoNotOptimize(frame.data());
  }
  report(state, frame_size);
}

void BM_MessageHead(benchmark::State& state) {
  const auto metadata = message_metadata();
  Slice entry = encode_entry(metadata, payload(static_cast<size_t>(state.range(0))));
  const auto command = commands::message(7, commands::message_id(12, 3456));
  size_t frame_size = 0;
  for (auto _ : state) {
    Slice head = encode_payload_head(command, entry.size());
    frame_size = head.size() + entry.size();
    benchmark::DoNotOptimize(head.data());
  }
  report(state, frame_size);
}

// This thread's CPU time, the clock Google Benchmark's rates use by default,
// so the ratio holds on a machine busy with other work.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Measures memcpy once per frame size, outside Google Benchmark's loop, so the
// codec benchmarks can report a ratio against it.
void measure_memcpy_baselines() {
  for (int64_t payload_size : {100, 1024}) {
    const size_t n = send_frame_size(static_cast<size_t>(payload_size));
    std::vector<uint8_t> src(n, 0x5a), dst(n);
    const size_t rounds = (size_t{256} << 20) / n;
    const double t0 = thread_cpu_seconds();
    for (size_t i = 0; i < rounds; ++i) {
      std::memcpy(dst.data(), src.data(), n);
      benchmark::DoNotOptimize(dst.data());
      benchmark::ClobberMemory();
    }
    const double secs = thread_cpu_seconds() - t0;
    g_memcpy_bytes_per_second[payload_size] = static_cast<double>(rounds) * static_cast<double>(n) / secs;
  }
}

BENCHMARK(BM_DecodeSend)->Arg(100)->Arg(1024);
BENCHMARK(BM_EncodeSend)->Arg(100)->Arg(1024);
BENCHMARK(BM_MessageHead)->Arg(100)->Arg(1024);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  measure_memcpy_baselines();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
