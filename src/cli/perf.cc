// `magnetar perf`: load a node through the Pulsar protocol and report
// throughput and latency percentiles, like pulsar-perf.
//
//   magnetar perf produce <topic>   publish at --rate (0: as fast as it goes)
//   magnetar perf consume <topic>   receive and measure end-to-end latency
//   magnetar perf disk <dir>        the disk alone under a group commit (perf_disk.cc)
//   magnetar perf                   both at once against one topic, then the
//                                   disk's own fdatasync bandwidth, same run
//
// Latency is measured from each message's *intended* send time: at a fixed
// rate message i is due at start + i/rate, and a send delayed by a slow
// broker (or a full pending window) counts the delay, so a stall is not
// hidden by the sender waiting it out (coordinated omission). The sender
// sleeps only when it is ahead by more than kPacingSlack (1 ms, the
// producer's batching delay): a message due sooner is handed over at once,
// so at a high rate the sender wakes once a batch, not once every few
// messages (each wake-up is CPU taken from the node when both share a small
// machine). It is still timed from when it was due: its batch is sealed the
// batching delay after the first message of the burst, as it would be if
// the messages had come one by one, so each waits for the seal what it
// would have waited. Timed from the hand-over instead, every message of a
// burst would wait the whole delay; that figure is reported too
// ("from hand-over"). The first 16
// bytes of every payload carry that intended time (wall clock, µs, in hex),
// which the consumer subtracts from its receive time for end-to-end latency;
// producer and consumer may run in different processes on one machine.
// Payloads are printable, so `magnetar consume` can show them.
//
// Publish latency is split in two more figures, so that a slow client can
// be told from a slow broker: the sender's lag (intended send time until
// the producer took the message: a sender short of CPU, or a full pending
// window) and each batch's round trip (sealed until its receipt was read).
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "cli/commands.h"
#include "cli/token_flags.h"
#include "client/compression.h"
#include "client/histogram.h"
#include "client/producer.h"
#include "client/pulsar_client.h"

namespace magnetar::cli {
namespace {

using Clock = std::chrono::steady_clock;
using client::Histogram;

struct PerfArgs {
  std::string url = "pulsar://localhost:6650";
  TokenFlags token;
  std::string topic = "perf";
  std::string subscription;  // consume: empty picks a fresh one
  int64_t messages = 0;      // 0: until --time
  double time_s = 0;         // 0: until --messages
  double rate = 0;           // messages/s; 0: as fast as the window allows
  int size = 1024;
  int window = 1000;  // messages waiting for receipts at most
  bool batch = true;
  uint32_t batch_max_messages = 1000;
  size_t batch_max_bytes = 128 * 1024;
  double batch_delay_ms = 1;
  std::string compression = "none";
  double interval_s = 5;
  std::string disk_dir;  // empty: no disk baseline
  bool json = false;
};

uint64_t wall_us() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

constexpr size_t kStampBytes = 16;
// How far ahead of its due time a message is sent rather than slept for.
constexpr auto kPacingSlack = std::chrono::milliseconds(1);

void put_stamp(char* out, uint64_t us) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < kStampBytes; ++i) out[i] = kHex[(us >> (4 * (kStampBytes - 1 - i))) & 0xf];
}

// The stamp at the front of `payload`, or nullopt when it carries none.
std::optional<uint64_t> read_stamp(std::string_view payload) {
  if (payload.size() < kStampBytes) return std::nullopt;
  uint64_t us = 0;
  for (size_t i = 0; i < kStampBytes; ++i) {
    char c = payload[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return std::nullopt;
    us = (us << 4) | static_cast<uint64_t>(d);
  }
  return us;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Sequential `chunk`-byte writes with fdatasync after each, `total` bytes:
// what the disk itself sustains for a durable append stream. 0 when it
// cannot be measured.
double disk_bytes_per_second(const std::string& dir, size_t chunk, size_t total) {
  std::string path = dir + "/.magnetar-perf-disk";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return 0;
  std::string data(chunk, 'd');
  auto t0 = Clock::now();
  size_t written = 0;
  while (written < total) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n <= 0 || ::fdatasync(fd) != 0) break;
    written += static_cast<size_t>(n);
  }
  double secs = seconds_since(t0);
  ::close(fd);
  ::unlink(path.c_str());
  return secs > 0 ? static_cast<double>(written) / secs : 0;
}

// Everything the producer, the consumer and the reporter share.
struct Stats {
  std::mutex mu;
  Histogram publish, publish_all;  // µs; this interval, whole run
  Histogram from_handover;         // µs, whole run: from handed over (or due, if later) to the receipt
  Histogram sender_lag;            // µs, whole run; merged from the sender's own when it ends
  Histogram round_trip;            // µs per batch, whole run
  Histogram e2e, e2e_all;
  uint64_t acked = 0, acked_interval = 0;
  uint64_t received = 0, received_interval = 0;
  uint64_t failed = 0;
  std::string first_error;
  Clock::time_point first_receive{}, last_receive{};
};

nlohmann::json percentiles_ms(const Histogram& h) {
  auto ms = [](uint64_t us) { return static_cast<double>(us) / 1000.0; };
  return {{"p50", ms(h.percentile(50))},   {"p95", ms(h.percentile(95))}, {"p99", ms(h.percentile(99))},
          {"p99_9", ms(h.percentile(99.9))}, {"max", ms(h.max())},         {"mean", h.mean() / 1000.0},
          {"count", h.count()}};
}

std::string percentiles_line(const Histogram& h) {
  auto ms = [](uint64_t us) { return static_cast<double>(us) / 1000.0; };
  return fmt::format("p50 {:.2f}  p95 {:.2f}  p99 {:.2f}  p99.9 {:.2f}  max {:.2f}", ms(h.percentile(50)),
                     ms(h.percentile(95)), ms(h.percentile(99)), ms(h.percentile(99.9)), ms(h.max()));
}

class Run {
 public:
  Run(const PerfArgs& a, bool produce, bool consume) : a_(a), produce_(produce), consume_(consume) {}

  int execute() {
    auto compression = client::parse_compression(a_.compression);
    if (!compression) return usage("unknown compression '" + a_.compression + "' (none, lz4, zlib, zstd, snappy)");
    if (a_.messages == 0 && a_.time_s <= 0) return usage("give --messages or --time");
    if (consume_) {
      if (auto st = start_consumer(); !st.is_ok()) return fail(st);
    }
    t0_ = Clock::now();
    std::thread reporter([this] { report_loop(); });
    int rc = 0;
    if (produce_) {
      rc = produce(*compression);
    } else {
      wait_for_consumer(Clock::time_point::max());
    }
    double produce_s = seconds_since(t0_);
    if (consume_ && produce_ && rc == 0) {
      // Whatever was stored reaches the consumer; give it the time, bounded.
      wait_for_consumer(Clock::now() + std::chrono::seconds(30));
    }
    stop_.store(true);
    {
      std::lock_guard g(stop_mu_);
      stop_cv_.notify_all();
    }
    reporter.join();
    if (consumer_.joinable()) consumer_.join();
    if (rc != 0) return rc;
    return summary(produce_s);
  }

 private:
  int usage(const std::string& why) {
    fmt::print(stderr, "magnetar: {}\n", why);
    return 2;
  }
  int fail(const common::Status& st) {
    fmt::print(stderr, "magnetar: {}\n", st.message());
    stop_.store(true);
    return 1;
  }

  bool done_producing(int64_t sent, Clock::time_point now) const {
    if (a_.messages > 0 && sent >= a_.messages) return true;
    return a_.time_s > 0 && std::chrono::duration<double>(now - t0_).count() >= a_.time_s;
  }

  int produce(client::CompressionType compression) {
    client::ProducerOptions o;
    o.topic = a_.topic;
    o.batching = a_.batch;
    o.batch.max_messages = a_.batch_max_messages;
    o.batch.max_bytes = a_.batch_max_bytes;
    o.batch.max_delay = std::chrono::microseconds(static_cast<int64_t>(a_.batch_delay_ms * 1000));
    o.max_pending_messages = static_cast<uint32_t>(a_.window);
    o.compression = compression;
    o.on_round_trip = [this](Clock::duration d) {
      auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
      std::lock_guard g(stats_.mu);
      stats_.round_trip.record(static_cast<uint64_t>(std::max<int64_t>(0, us)));
    };
    auto client_options = client_options_of(a_.token);
    if (!client_options) return fail(client_options.status());
    auto url = client::PulsarClient::service_url_for(a_.url, a_.topic, *client_options);
    if (!url) return fail(url.status());
    auto producer = client::Producer::create(*url, o, *client_options);
    if (!producer) return fail(producer.status());
    // Random letters and digits, so compression does not shrink the data to
    // nothing; the first 16 bytes are each message's intended send time.
    static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string payload(static_cast<size_t>(a_.size), '\0');
    std::mt19937_64 rng(42);
    for (auto& c : payload) c = kAlphabet[rng() % 64];
    const bool timed = payload.size() >= kStampBytes;
    auto period = a_.rate > 0 ? std::chrono::duration<double>(1.0 / a_.rate) : std::chrono::duration<double>(0);
    auto start = Clock::now();
    t0_ = start;
    uint64_t wall_start = wall_us();
    int64_t sent = 0;
    Histogram lag;  // this thread's own, merged into stats_ at the end
    common::Status error;
    for (;;) {
      Clock::time_point now = Clock::now();
      if (stop_.load() || done_producing(sent, now)) break;
      Clock::time_point intended = now;
      if (a_.rate > 0) {
        intended = start + std::chrono::duration_cast<Clock::duration>(period * static_cast<double>(sent));
        if (intended > now + kPacingSlack) {
          std::this_thread::sleep_until(intended);
          now = Clock::now();
        }
      }
      uint64_t intended_wall =
          wall_start + static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(intended - start).count());
      if (timed) put_stamp(payload.data(), intended_wall);
      client::OutgoingMessage m;
      m.payload = payload;
      // A message handed over early is timed from then in the hand-over figure; a late one from when it was due.
      auto st = (*producer)->send_async(m, [this, intended, handed = std::min(intended, now)](
                                               common::Result<client::MessageId> r) {
        auto at = Clock::now();
        auto us = std::chrono::duration_cast<std::chrono::microseconds>(at - intended).count();
        auto handover_us = std::chrono::duration_cast<std::chrono::microseconds>(at - handed);
        std::lock_guard g(stats_.mu);
        if (!r.is_ok()) {
          if (stats_.failed++ == 0) stats_.first_error = r.status().message();
          return;
        }
        stats_.publish.record(static_cast<uint64_t>(std::max<int64_t>(0, us)));
        stats_.from_handover.record(static_cast<uint64_t>(std::max<int64_t>(0, handover_us.count())));
        ++stats_.acked_interval;
        ++stats_.acked;
      });
      if (!st.is_ok()) {
        error = st;
        break;
      }
      auto late = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - intended).count();
      lag.record(static_cast<uint64_t>(std::max<int64_t>(0, late)));
      ++sent;
    }
    {
      std::lock_guard g(stats_.mu);
      stats_.sender_lag.merge(lag);
    }
    auto flushed = (*producer)->flush();
    sent_ = sent;
    (void)(*producer)->close();
    if (!error.is_ok()) return fail(error);
    if (!flushed.is_ok()) return fail(flushed);
    std::lock_guard g(stats_.mu);
    if (stats_.failed > 0) {
      return fail(common::Status::unavailable(fmt::format("{} messages failed: {}", stats_.failed, stats_.first_error)));
    }
    return 0;
  }

  common::Status start_consumer() {
    auto client_options = client_options_of(a_.token);
    if (!client_options) return client_options.status();
    auto url = client::PulsarClient::service_url_for(a_.url, a_.topic, *client_options);
    if (!url) return url.status();
    auto client = client::PulsarClient::connect(*url, *client_options);
    if (!client) return client.status();
    std::string subscription = a_.subscription.empty() ? fmt::format("perf-{}", ::getpid()) : a_.subscription;
    // A fresh subscription at the end of the topic sees exactly this run's messages.
    auto consumer = (*client)->subscribe(a_.topic, subscription, client::SubscriptionType::kExclusive, false, 5000);
    if (!consumer) return consumer.status();
    consumer_ = std::thread([this, c = std::move(*client), id = *consumer]() mutable { consume_loop(*c, id); });
    return common::Status::ok();
  }

  void consume_loop(client::PulsarClient& c, uint64_t id) {
    int64_t since_ack = 0;
    for (;;) {
      if (stop_.load()) break;
      auto m = c.receive(id, std::chrono::milliseconds(200));
      if (!m) {
        if (m.status().code() == common::ErrorCode::kTimeout) continue;
        std::lock_guard g(stats_.mu);
        if (stats_.first_error.empty()) stats_.first_error = m.status().message();
        break;
      }
      auto now = Clock::now();
      uint64_t now_wall = wall_us();
      bool all_in = false;
      {
        std::lock_guard g(stats_.mu);
        if (auto intended = read_stamp(m->payload)) {
          stats_.e2e.record(now_wall > *intended ? now_wall - *intended : 0);
        }
        if (stats_.received == 0) stats_.first_receive = now;
        stats_.last_receive = now;
        ++stats_.received;
        ++stats_.received_interval;
        uint64_t expected = produce_ ? static_cast<uint64_t>(sent_.load()) : static_cast<uint64_t>(a_.messages);
        all_in = expected > 0 && stats_.received >= expected;
      }
      // Cumulative acks on whole entries, every thousand messages or so: the
      // cursor moves with one range, as a real consumer's would.
      bool ends_entry = m->id.batch_index < 0 || m->id.batch_index + 1 >= m->id.batch_size;
      if (++since_ack >= 1000 && ends_entry) {
        (void)c.ack_cumulative(id, m->id);
        since_ack = 0;
      }
      if (all_in) {
        std::lock_guard s(stop_mu_);
        consumer_done_ = true;
        stop_cv_.notify_all();
        if (!produce_) break;
      }
    }
    (void)c.close_consumer(id);
  }

  void wait_for_consumer(Clock::time_point deadline) {
    std::unique_lock lock(stop_mu_);
    auto done = [&] {
      if (consumer_done_ || stop_.load()) return true;
      if (!produce_ && a_.time_s > 0 && seconds_since(t0_) >= a_.time_s) return true;
      if (produce_) {
        // Lock order: stop_mu_, then stats_.mu (the consumer never holds both).
        std::lock_guard g(stats_.mu);
        return stats_.received >= static_cast<uint64_t>(sent_.load()) || !stats_.first_error.empty();
      }
      return false;
    };
    while (!done() && Clock::now() < deadline) stop_cv_.wait_for(lock, std::chrono::milliseconds(100));
  }

  void report_loop() {
    auto last = Clock::now();
    auto interval = std::chrono::duration<double>(a_.interval_s);
    for (;;) {
      {
        std::unique_lock lock(stop_mu_);
        if (stop_cv_.wait_for(lock, interval, [&] { return stop_.load(); })) break;
      }
      auto now = Clock::now();
      double secs = std::chrono::duration<double>(now - last).count();
      last = now;
      std::lock_guard g(stats_.mu);
      std::string line = fmt::format("[{:6.1f}s]", seconds_since(t0_));
      if (produce_) {
        double rate = static_cast<double>(stats_.acked_interval) / secs;
        line += fmt::format(" produce {:>9.0f} msg/s {:>7.1f} MiB/s | publish ms {}", rate,
                            rate * a_.size / (1 << 20), percentiles_line(stats_.publish));
      }
      if (consume_) {
        double rate = static_cast<double>(stats_.received_interval) / secs;
        line += fmt::format("{} consume {:>9.0f} msg/s | end-to-end ms {}", produce_ ? " |" : "", rate,
                            percentiles_line(stats_.e2e));
      }
      stats_.publish_all.merge(stats_.publish);
      stats_.e2e_all.merge(stats_.e2e);
      stats_.publish.reset();
      stats_.e2e.reset();
      stats_.acked_interval = stats_.received_interval = 0;
      if (!a_.json) {
        fmt::print("{}\n", line);
        std::fflush(stdout);
      }
    }
    std::lock_guard g(stats_.mu);
    stats_.publish_all.merge(stats_.publish);
    stats_.e2e_all.merge(stats_.e2e);
  }

  int summary(double produce_s) {
    std::lock_guard g(stats_.mu);
    double bytes = static_cast<double>(stats_.acked) * a_.size;
    double produce_rate = produce_s > 0 ? static_cast<double>(stats_.acked) / produce_s : 0;
    double consume_s = std::chrono::duration<double>(stats_.last_receive - stats_.first_receive).count();
    double consume_rate = consume_s > 0 ? static_cast<double>(stats_.received) / consume_s : 0;
    double disk1 = 0, disk4 = 0;
    if (!a_.disk_dir.empty()) {
      size_t total = static_cast<size_t>(std::max(bytes, double(128 << 20)));
      disk1 = disk_bytes_per_second(a_.disk_dir, 1 << 20, total);
      disk4 = disk_bytes_per_second(a_.disk_dir, 4 << 20, total);
    }
    double disk = std::max(disk1, disk4);
    double produce_bw = produce_s > 0 ? bytes / produce_s : 0;
    if (produce_ && consume_ && stats_.received < stats_.acked) {
      fmt::print(stderr, "magnetar: the consumer received {} of {} messages{}\n", stats_.received, stats_.acked,
                 stats_.first_error.empty() ? "" : ": " + stats_.first_error);
      return 1;
    }
    if (a_.json) {
      nlohmann::json j{{"topic", a_.topic},
                       {"size", a_.size},
                       {"rate", a_.rate},
                       {"window", a_.window},
                       {"batching", a_.batch},
                       {"compression", a_.compression}};
      if (produce_) {
        j["messages"] = stats_.acked;
        j["produce_seconds"] = produce_s;
        j["produce_msgs_per_s"] = produce_rate;
        j["produce_bytes_per_s"] = produce_bw;
        j["publish_latency_ms"] = percentiles_ms(stats_.publish_all);
        j["publish_from_handover_ms"] = percentiles_ms(stats_.from_handover);
        j["sender_lag_ms"] = percentiles_ms(stats_.sender_lag);
        j["round_trip_ms"] = percentiles_ms(stats_.round_trip);
      }
      if (consume_) {
        j["received"] = stats_.received;
        j["consume_msgs_per_s"] = consume_rate;
        j["end_to_end_latency_ms"] = percentiles_ms(stats_.e2e_all);
      }
      if (!a_.disk_dir.empty()) {
        j["disk_fdatasync_bytes_per_s"] = disk;
        j["disk_fdatasync_1mib_bytes_per_s"] = disk1;
        j["disk_fdatasync_4mib_bytes_per_s"] = disk4;
        j["produce_vs_disk"] = disk > 0 ? produce_bw / disk : 0;
      }
      fmt::print("{}\n", j.dump());
      return 0;
    }
    fmt::print("Summary: {} B messages, {}, compression {}, at most {} pending\n", a_.size,
               a_.batch ? fmt::format("batches of up to {} messages / {} KiB / {} ms", a_.batch_max_messages,
                                      a_.batch_max_bytes / 1024, a_.batch_delay_ms)
                        : std::string("no batching"),
               a_.compression, a_.window);
    if (produce_) {
      fmt::print("  produced {} in {:.1f} s: {:.0f} msg/s, {:.1f} MiB/s{}\n", stats_.acked, produce_s, produce_rate,
                 produce_bw / (1 << 20), a_.rate > 0 ? fmt::format(" (target {:.0f} msg/s)", a_.rate) : "");
      fmt::print("  publish latency ms     {}\n", percentiles_line(stats_.publish_all));
      fmt::print("    from hand-over ms    {}\n", percentiles_line(stats_.from_handover));
      fmt::print("    sender lag ms        {}\n", percentiles_line(stats_.sender_lag));
      fmt::print("    batch round trip ms  {}\n", percentiles_line(stats_.round_trip));
    }
    if (consume_) {
      fmt::print("  consumed {}: {:.0f} msg/s\n", stats_.received, consume_rate);
      fmt::print("  end-to-end latency ms  {}\n", percentiles_line(stats_.e2e_all));
    }
    if (disk > 0) {
      fmt::print("  disk {:.1f} MiB/s (sequential writes + fdatasync in {}: 1 MiB {:.1f}, 4 MiB {:.1f}); produce = {:.2f}x of it\n",
                 disk / (1 << 20), a_.disk_dir, disk1 / (1 << 20), disk4 / (1 << 20), produce_bw / disk);
    }
    return 0;
  }

  const PerfArgs& a_;
  const bool produce_, consume_;
  Stats stats_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> sent_{0};
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool consumer_done_ = false;
  std::thread consumer_;
  Clock::time_point t0_ = Clock::now();
};

void add_load_options(CLI::App* cmd, PerfArgs& a, bool produce) {
  cmd->add_option("--url", a.url, "Pulsar service URL")->capture_default_str();
  add_token_flags(*cmd, a.token);
  cmd->add_option("-n,--messages", a.messages, "Messages to send (or receive); 0: until --time")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{10000000000}));
  cmd->add_option("-t,--time", a.time_s, "Seconds to run; 0: until --messages")->capture_default_str()->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--interval", a.interval_s, "Seconds between progress lines")->capture_default_str()->check(CLI::Range(0.1, 3600.0));
  cmd->add_flag("--json", a.json, "Print one JSON object with the figures instead of progress lines");
  if (!produce) return;
  cmd->add_option("-r,--rate", a.rate, "Messages per second; 0: as fast as the pending window allows")
      ->capture_default_str()->check(CLI::Range(0.0, 1e8));
  cmd->add_option("-s,--size", a.size, "Payload bytes per message")->capture_default_str()->check(CLI::Range(0, 5 << 20));
  cmd->add_option("-w,--window,--max-pending", a.window, "Messages waiting for receipts at most")
      ->capture_default_str()->check(CLI::Range(1, 1000000));
  cmd->add_option("--batch", a.batch, "Batch messages into entries like Pulsar clients (true/false)")->capture_default_str();
  cmd->add_option("--batch-max-messages", a.batch_max_messages, "A batch closes at this many messages")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--batch-max-bytes", a.batch_max_bytes, "... or this many payload bytes")
      ->capture_default_str()->check(CLI::Range(1, 4 << 20));
  cmd->add_option("--batch-delay-ms", a.batch_delay_ms, "... or this long after its first message")
      ->capture_default_str()->check(CLI::Range(0.0, 10000.0));
  cmd->add_option("-z,--compression", a.compression, "none, lz4, zlib, zstd or snappy")->capture_default_str();
  cmd->add_option("--disk-dir", a.disk_dir,
                  "After the run, measure the disk's own sequential write + fdatasync bandwidth here (the node's "
                  "data directory); empty: skip")
      ->capture_default_str();
}

}  // namespace

CLI::App* add_perf_command(CLI::App& app, Command& run) {
  auto both = std::make_shared<PerfArgs>();
  both->disk_dir = ".";
  auto* cmd = app.add_subcommand(
      "perf", "Measure a node: produce and consume one topic, latency percentiles, against the disk's own bandwidth");
  cmd->add_option("--topic", both->topic, "Topic to use")->capture_default_str();
  add_load_options(cmd, *both, true);
  cmd->footer(
      "Examples:\n"
      "  magnetar perf -n 1000000 -s 1024 --disk-dir ./data\n"
      "  magnetar perf --rate 50000 --time 30 --compression lz4\n"
      "  magnetar perf produce my-topic --rate 10000 --size 1024 --time 60\n"
      "  magnetar perf consume my-topic --time 60\n"
      "  magnetar perf disk ./data --rate-mib 140 --write-kib 128 --time 10\n");

  auto prod = std::make_shared<PerfArgs>();
  prod->time_s = 60;
  auto* p = cmd->add_subcommand("produce", "Publish at a rate and report throughput and publish latency");
  p->add_option("topic", prod->topic, "Topic")->required();
  add_load_options(p, *prod, true);
  p->callback([&run, prod]() { run = [prod]() { return Run(*prod, true, false).execute(); }; });

  auto cons = std::make_shared<PerfArgs>();
  cons->time_s = 60;
  auto* c = cmd->add_subcommand("consume", "Receive and report throughput and end-to-end latency");
  c->add_option("topic", cons->topic, "Topic")->required();
  c->add_option("--subscription", cons->subscription, "Subscription (default: a fresh one at the end of the topic)");
  add_load_options(c, *cons, false);
  c->callback([&run, cons]() { run = [cons]() { return Run(*cons, false, true).execute(); }; });

  add_perf_disk_command(cmd, run);

  cmd->callback([&run, both, cmd]() {
    if (!cmd->get_subcommands().empty()) return;
    if (both->messages == 0 && both->time_s <= 0) both->messages = 100000;
    run = [both]() { return Run(*both, true, true).execute(); };
  });
  return cmd;
}

}  // namespace magnetar::cli
