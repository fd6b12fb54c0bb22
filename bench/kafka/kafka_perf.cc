// kafka_perf: the Kafka produce path end to end, through librdkafka, the way
// `magnetar perf produce` measures the Pulsar path: messages of --size bytes
// for --time seconds, as fast as the client takes them or at --rate per
// second, with publish latency counted from each message's intended send time
// to its delivery report (so a stalled broker cannot hide behind a stalled
// client). Prints a progress line every 2 s and a summary; --json prints the
// summary as one JSON line.
//
//   kafka_perf --brokers 127.0.0.1:9092 --topic bench --size 1024 --time 20 [--rate R] [--acks all]
#include <librdkafka/rdkafka.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "client/histogram.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Stats {
  magnetar::client::Histogram latency_us;
  uint64_t delivered = 0;
  uint64_t failed = 0;
};

// Each message's opaque is its intended send time (ns since `origin`).
Clock::time_point origin;

void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  auto* stats = static_cast<Stats*>(opaque);
  if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    ++stats->failed;
    return;
  }
  auto intended = origin + std::chrono::nanoseconds(reinterpret_cast<intptr_t>(m->_private));
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - intended).count();
  stats->latency_us.record(static_cast<uint64_t>(std::max<int64_t>(us, 0)));
  ++stats->delivered;
}

double ms(uint64_t us) { return static_cast<double>(us) / 1000.0; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kafka_perf: produce through librdkafka and report throughput and latency"};
  std::string brokers = "127.0.0.1:9092", topic = "kafka-perf", acks = "all", compression = "none";
  size_t size = 1024;
  double seconds = 20, rate = 0;
  int linger_ms = 1;
  bool json = false;
  app.add_option("--brokers", brokers, "bootstrap servers");
  app.add_option("--topic", topic, "topic to produce to");
  app.add_option("-s,--size", size, "message size in bytes");
  app.add_option("-t,--time", seconds, "seconds to produce for");
  app.add_option("-r,--rate", rate, "messages per second (0: as fast as possible)");
  app.add_option("--acks", acks, "acks: 0, 1 or all");
  app.add_option("--linger-ms", linger_ms, "librdkafka linger.ms (batching delay)");
  app.add_option("-z,--compression", compression, "none, gzip, snappy, lz4, zstd");
  app.add_flag("--json", json, "print the summary as one JSON line");
  CLI11_PARSE(app, argc, argv);

  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  auto set = [&](const char* k, const std::string& v) {
    if (rd_kafka_conf_set(conf, k, v.c_str(), err, sizeof(err)) != RD_KAFKA_CONF_OK) {
      fmt::print(stderr, "kafka_perf: {}={}: {}\n", k, v, err);
      std::exit(2);
    }
  };
  set("bootstrap.servers", brokers);
  set("acks", acks);
  set("linger.ms", std::to_string(linger_ms));
  set("compression.codec", compression);
  set("queue.buffering.max.messages", "1000000");
  Stats stats;
  rd_kafka_conf_set_opaque(conf, &stats);
  rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
  if (rk == nullptr) {
    fmt::print(stderr, "kafka_perf: {}\n", err);
    return 2;
  }
  std::vector<char> payload(size, 'x');
  for (size_t i = 0; i < size; ++i) payload[i] = static_cast<char>('a' + i % 26);

  origin = Clock::now();
  const auto end = origin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  auto next_report = origin + std::chrono::seconds(2);
  uint64_t sent = 0, last_delivered = 0;
  auto last_report = origin;
  const double interval_ns = rate > 0 ? 1e9 / rate : 0;
  while (true) {
    auto now = Clock::now();
    if (now >= end) break;
    // At a fixed rate, message n is due at origin + n * interval: its latency
    // counts from then, however late the client gets to it.
    auto intended = rate > 0 ? origin + std::chrono::nanoseconds(static_cast<int64_t>(sent * interval_ns)) : now;
    if (rate > 0 && intended > now) {
      rd_kafka_poll(rk, 0);
      std::this_thread::sleep_until(std::min(intended, end));
      continue;
    }
    auto opaque = reinterpret_cast<void*>(static_cast<intptr_t>((intended - origin).count()));
    rd_kafka_resp_err_t e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic.c_str()),
                                              RD_KAFKA_V_VALUE(payload.data(), payload.size()),
                                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(opaque),
                                              RD_KAFKA_V_END);
    if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
      rd_kafka_poll(rk, 1);
      continue;
    }
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      fmt::print(stderr, "kafka_perf: produce: {}\n", rd_kafka_err2str(e));
      return 1;
    }
    ++sent;
    if ((sent & 1023) == 0) rd_kafka_poll(rk, 0);
    if (now >= next_report) {
      double dt = std::chrono::duration<double>(now - last_report).count();
      double r = static_cast<double>(stats.delivered - last_delivered) / dt;
      if (!json) {
        fmt::print("{:6.1f}s  {:>10.0f} msg/s  {:>8.1f} MiB/s  p50 {:.2f} ms  p99 {:.2f} ms\n",
                   std::chrono::duration<double>(now - origin).count(), r, r * static_cast<double>(size) / (1 << 20),
                   ms(stats.latency_us.percentile(50)), ms(stats.latency_us.percentile(99)));
      }
      last_delivered = stats.delivered;
      last_report = now;
      next_report += std::chrono::seconds(2);
    }
  }
  const double produce_s = std::chrono::duration<double>(Clock::now() - origin).count();
  rd_kafka_flush(rk, 30000);
  const double total_s = std::chrono::duration<double>(Clock::now() - origin).count();
  rd_kafka_destroy(rk);
  const auto& h = stats.latency_us;
  // Throughput over the time until the last delivery report: what the
  // broker stored per second, not what the client queued.
  double msgs_per_s = static_cast<double>(stats.delivered) / total_s;
  if (json) {
    fmt::print("{{\"messages\":{},\"failed\":{},\"size\":{},\"rate\":{},\"acks\":\"{}\",\"produce_seconds\":{:.3f},"
               "\"produce_msgs_per_s\":{:.1f},\"produce_bytes_per_s\":{:.1f},\"publish_latency_ms\":{{\"p50\":{:.3f},"
               "\"p95\":{:.3f},\"p99\":{:.3f},\"p99_9\":{:.3f},\"max\":{:.3f}}}}}\n",
               stats.delivered, stats.failed, size, rate, acks, produce_s, msgs_per_s,
               msgs_per_s * static_cast<double>(size), ms(h.percentile(50)), ms(h.percentile(95)), ms(h.percentile(99)),
               ms(h.percentile(99.9)), ms(h.max()));
  } else {
    fmt::print("produced {} messages ({} failed) in {:.1f} s: {:.0f} msg/s, {:.1f} MiB/s\n", stats.delivered,
               stats.failed, total_s, msgs_per_s, msgs_per_s * static_cast<double>(size) / (1 << 20));
    fmt::print("publish latency ms: p50 {:.2f}  p95 {:.2f}  p99 {:.2f}  p99.9 {:.2f}  max {:.2f}\n", ms(h.percentile(50)),
               ms(h.percentile(95)), ms(h.percentile(99)), ms(h.percentile(99.9)), ms(h.max()));
  }
  return stats.failed == 0 ? 0 : 1;
}
