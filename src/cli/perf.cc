// `magnetar perf`: end-to-end throughput of a node, producing then consuming
// through the Pulsar protocol, against the disk's own fdatasync bandwidth
// measured in the same run.
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "client/pulsar_client.h"

namespace magnetar::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct PerfArgs {
  std::string url = "pulsar://localhost:6650";
  std::string topic = "perf";
  int messages = 100000;
  int size = 1024;
  int window = 1000;
  std::string disk_dir = ".";
  bool json = false;
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Sequential 1 MiB writes with fdatasync after each, `total` bytes: what the
// disk itself sustains for a durable append stream. 0 when it cannot be measured.
double disk_bytes_per_second(const std::string& dir, size_t total) {
  std::string path = dir + "/.magnetar-perf-disk";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return 0;
  std::string chunk(1 << 20, 'd');
  auto t0 = Clock::now();
  size_t written = 0;
  while (written < total) {
    ssize_t n = ::write(fd, chunk.data(), chunk.size());
    if (n <= 0 || ::fdatasync(fd) != 0) break;
    written += static_cast<size_t>(n);
  }
  double secs = seconds_since(t0);
  ::close(fd);
  ::unlink(path.c_str());
  return secs > 0 ? static_cast<double>(written) / secs : 0;
}

int run_perf(const PerfArgs& a) {
  auto client = client::PulsarClient::connect(a.url);
  if (!client) {
    fmt::print(stderr, "magnetar: {}\n", client.status().message());
    return 1;
  }
  // A fresh subscription at the end of the topic sees exactly this run's messages.
  std::string subscription = fmt::format("perf-{}", ::getpid());
  auto consumer = (*client)->subscribe(a.topic, subscription, client::SubscriptionType::kExclusive, false, 1000);
  auto producer = (*client)->create_producer(a.topic);
  if (!consumer || !producer) {
    fmt::print(stderr, "magnetar: {}\n", (!consumer ? consumer.status() : producer.status()).message());
    return 1;
  }
  std::vector<std::string> batch(static_cast<size_t>(std::min(a.messages, 10000)), std::string(a.size, 'm'));
  auto t0 = Clock::now();
  int sent = 0;
  auto last_report = t0;
  while (sent < a.messages) {
    size_t n = std::min<size_t>(batch.size(), static_cast<size_t>(a.messages - sent));
    std::vector<std::string> part(batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(n));
    auto done = (*client)->send_many(*producer, part, static_cast<size_t>(a.window));
    if (!done) {
      fmt::print(stderr, "magnetar: {}\n", done.status().message());
      return 1;
    }
    sent += static_cast<int>(*done);
    if (!a.json && seconds_since(last_report) >= 1.0) {
      fmt::print(stderr, "  produced {}/{}\n", sent, a.messages);
      last_report = Clock::now();
    }
  }
  double produce_s = seconds_since(t0);
  // Whatever the consumer received while we produced is already queued.
  auto t1 = Clock::now();
  int received = 0;
  while (received < a.messages) {
    auto m = (*client)->receive(*consumer, std::chrono::seconds(10));
    if (!m) {
      fmt::print(stderr, "magnetar: consumed {} of {}: {}\n", received, a.messages, m.status().message());
      return 1;
    }
    ++received;
    if (received % 1000 == 0 || received == a.messages) (void)(*client)->ack(*consumer, m->id);
  }
  double consume_s = seconds_since(t1);
  (void)(*client)->close_consumer(*consumer);
  (void)(*client)->close_producer(*producer);

  double bytes = static_cast<double>(a.messages) * a.size;
  double disk = disk_bytes_per_second(a.disk_dir, static_cast<size_t>(std::max(bytes, double(64 << 20))));
  double produce_rate = a.messages / produce_s, produce_bw = bytes / produce_s;
  double consume_rate = a.messages / consume_s;
  if (a.json) {
    fmt::print("{}\n", nlohmann::json{{"messages", a.messages},
                                      {"size", a.size},
                                      {"window", a.window},
                                      {"produce_msgs_per_s", produce_rate},
                                      {"produce_bytes_per_s", produce_bw},
                                      {"consume_msgs_per_s", consume_rate},
                                      {"disk_fdatasync_bytes_per_s", disk},
                                      {"produce_vs_disk", disk > 0 ? produce_bw / disk : 0}}
                           .dump());
    return 0;
  }
  fmt::print("{} messages of {} B, {} in flight\n", a.messages, a.size, a.window);
  fmt::print("  produce  {:>10.0f} msg/s  {:>8.1f} MiB/s\n", produce_rate, produce_bw / (1 << 20));
  fmt::print("  consume  {:>10.0f} msg/s  (after producing; tail reads)\n", consume_rate);
  if (disk > 0) {
    fmt::print("  disk     {:>8.1f} MiB/s sequential 1 MiB writes + fdatasync in {}; produce = {:.2f}x of it\n",
               disk / (1 << 20), a.disk_dir, produce_bw / disk);
  }
  return 0;
}

}  // namespace

CLI::App* add_perf_command(CLI::App& app, Command& run) {
  auto a = std::make_shared<PerfArgs>();
  auto* cmd = app.add_subcommand("perf", "Measure produce and consume throughput of a node end to end");
  cmd->add_option("--url", a->url, "Pulsar service URL")->capture_default_str();
  cmd->add_option("--topic", a->topic, "Topic to use")->capture_default_str();
  cmd->add_option("-n,--messages", a->messages, "Messages to produce and consume")->capture_default_str()->check(CLI::Range(1, 100000000));
  cmd->add_option("-s,--size", a->size, "Payload bytes per message")->capture_default_str()->check(CLI::Range(0, 5 << 20));
  cmd->add_option("-w,--window", a->window, "Messages in flight")->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--disk-dir", a->disk_dir, "Where to measure the disk baseline (the node's data directory)")->capture_default_str();
  cmd->add_flag("--json", a->json, "Print one JSON object with the figures");
  cmd->footer("Examples:\n  magnetar perf -n 200000 -s 100 --disk-dir ./data\n  magnetar perf --url pulsar://10.0.0.5:6650 --json\n");
  cmd->callback([&run, a]() { run = [a]() { return run_perf(*a); }; });
  return cmd;
}

}  // namespace magnetar::cli
