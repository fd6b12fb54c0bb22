// amqp_perf: one durable queue, persistent messages of --size bytes
// published with publisher confirms for --time seconds (at most --window
// unconfirmed at a time) while a second connection consumes them with
// manual acknowledgements (prefetch --prefetch). Reports confirmed
// publishes per second, consumed messages per second, the publish latency
// from send to confirm and the end-to-end latency from send to delivery
// (each message carries its send time in its first 8 bytes). --json prints the summary as one JSON line.
//
//   amqp_perf --port 5672 --queue bench --size 1024 --time 20 [--window 1000] [--json]
#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_tcp_socket.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "client/histogram.h"

namespace {

using Clock = std::chrono::steady_clock;

void check_rpc(amqp_rpc_reply_t r, const char* what) {
  if (r.reply_type == AMQP_RESPONSE_NORMAL) return;
  fmt::print(stderr, "amqp_perf: {} failed (reply type {})\n", what, static_cast<int>(r.reply_type));
  std::exit(1);
}

amqp_connection_state_t open(const std::string& host, int port) {
  amqp_connection_state_t conn = amqp_new_connection();
  amqp_socket_t* socket = amqp_tcp_socket_new(conn);
  if (socket == nullptr || amqp_socket_open(socket, host.c_str(), port) != AMQP_STATUS_OK) {
    fmt::print(stderr, "amqp_perf: cannot connect to {}:{}\n", host, port);
    std::exit(1);
  }
  check_rpc(amqp_login(conn, "/", 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, "guest", "guest"), "login");
  amqp_channel_open(conn, 1);
  check_rpc(amqp_get_rpc_reply(conn), "channel.open");
  return conn;
}

void close(amqp_connection_state_t conn) {
  amqp_channel_close(conn, 1, AMQP_REPLY_SUCCESS);
  amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
  amqp_destroy_connection(conn);
}

double ms(uint64_t us) { return static_cast<double>(us) / 1000.0; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"amqp_perf: publish with confirms and consume with acks, one durable queue"};
  std::string host = "127.0.0.1", queue = "amqp-perf";
  int port = 5672;
  size_t size = 1024, window = 1000;
  uint16_t prefetch = 1000;
  double seconds = 20;
  bool json = false;
  app.add_option("--host", host, "broker host");
  app.add_option("--port", port, "broker AMQP port");
  app.add_option("--queue", queue, "durable queue to use (declared, then purged)");
  app.add_option("-s,--size", size, "message size in bytes");
  app.add_option("-t,--time", seconds, "seconds to publish for");
  app.add_option("-w,--window", window, "unconfirmed publishes at most");
  app.add_option("--prefetch", prefetch, "the consumer's prefetch count");
  app.add_flag("--json", json, "print the summary as one JSON line");
  CLI11_PARSE(app, argc, argv);

  amqp_connection_state_t pub = open(host, port);
  amqp_queue_declare(pub, 1, amqp_cstring_bytes(queue.c_str()), 0, 1, 0, 0, amqp_empty_table);
  check_rpc(amqp_get_rpc_reply(pub), "queue.declare");
  amqp_queue_purge(pub, 1, amqp_cstring_bytes(queue.c_str()));
  check_rpc(amqp_get_rpc_reply(pub), "queue.purge");
  amqp_confirm_select(pub, 1);
  check_rpc(amqp_get_rpc_reply(pub), "confirm.select");

  // The consumer: acknowledges every 100 messages at once (multiple), and
  // times each message from its publish (stamped in its first 8 bytes) to
  // its delivery.
  std::atomic<uint64_t> consumed{0};
  std::atomic<bool> stop{false};
  magnetar::client::Histogram end_to_end_us;
  const auto stamp_origin = Clock::now();
  std::thread consumer([&]() {
    amqp_connection_state_t con = open(host, port);
    amqp_basic_qos(con, 1, 0, prefetch, 0);
    check_rpc(amqp_get_rpc_reply(con), "basic.qos");
    amqp_basic_consume(con, 1, amqp_cstring_bytes(queue.c_str()), amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
    check_rpc(amqp_get_rpc_reply(con), "basic.consume");
    uint64_t unacked = 0;
    while (!stop.load()) {
      amqp_envelope_t envelope;
      amqp_maybe_release_buffers(con);
      struct timeval tv = {0, 200000};
      amqp_rpc_reply_t r = amqp_consume_message(con, &envelope, &tv, 0);
      if (r.reply_type != AMQP_RESPONSE_NORMAL) continue;
      consumed.fetch_add(1);
      if (envelope.message.body.len >= sizeof(int64_t)) {
        int64_t sent_ns = 0;
        std::memcpy(&sent_ns, envelope.message.body.bytes, sizeof(sent_ns));
        const int64_t now_ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - stamp_origin).count();
        if (now_ns >= sent_ns) end_to_end_us.record(static_cast<uint64_t>((now_ns - sent_ns) / 1000));
      }
      if (++unacked >= 100) {
        amqp_basic_ack(con, 1, envelope.delivery_tag, 1);
        unacked = 0;
      }
      amqp_destroy_envelope(&envelope);
    }
    close(con);
  });

  std::string payload(size, 'x');
  for (size_t i = 0; i < size; ++i) payload[i] = static_cast<char>('a' + i % 26);
  amqp_basic_properties_t props;
  props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_CONTENT_TYPE_FLAG;
  props.delivery_mode = 2;
  props.content_type = amqp_cstring_bytes("application/octet-stream");
  amqp_bytes_t body{payload.size(), payload.data()};

  magnetar::client::Histogram latency_us;
  std::map<uint64_t, Clock::time_point> outstanding;  // publish sequence number -> sent at
  uint64_t next_seq = 1, confirmed = 0, nacked = 0;
  const auto origin = Clock::now();
  const auto end = origin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  // basic.ack / basic.nack for `tag` (and every earlier one with `multiple`).
  auto settle = [&](uint64_t tag, bool multiple, bool ok) {
    const auto now = Clock::now();
    auto first = multiple ? outstanding.begin() : outstanding.find(tag);
    auto last = multiple ? outstanding.upper_bound(tag) : (first == outstanding.end() ? first : std::next(first));
    for (auto it = first; it != last; ++it) {
      auto us = std::chrono::duration_cast<std::chrono::microseconds>(now - it->second).count();
      latency_us.record(static_cast<uint64_t>(us));
      (ok ? confirmed : nacked) += 1;
    }
    outstanding.erase(first, last);
  };
  auto read_confirms = [&](bool block) {
    while (true) {
      amqp_frame_t frame;
      struct timeval tv = {0, block ? 100000 : 0};
      int rc = amqp_simple_wait_frame_noblock(pub, &frame, &tv);
      if (rc != AMQP_STATUS_OK) return;
      if (frame.frame_type == AMQP_FRAME_METHOD) {
        if (frame.payload.method.id == AMQP_BASIC_ACK_METHOD) {
          auto* ack = static_cast<amqp_basic_ack_t*>(frame.payload.method.decoded);
          settle(ack->delivery_tag, ack->multiple != 0, true);
        } else if (frame.payload.method.id == AMQP_BASIC_NACK_METHOD) {
          auto* nack = static_cast<amqp_basic_nack_t*>(frame.payload.method.decoded);
          settle(nack->delivery_tag, nack->multiple != 0, false);
        }
      }
      block = false;
      if (!amqp_frames_enqueued(pub) && !amqp_data_in_buffer(pub)) return;
    }
  };
  while (Clock::now() < end) {
    while (outstanding.size() < window && Clock::now() < end) {
      if (payload.size() >= sizeof(int64_t)) {
        const int64_t now_ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - stamp_origin).count();
        std::memcpy(payload.data(), &now_ns, sizeof(now_ns));
      }
      if (amqp_basic_publish(pub, 1, amqp_empty_bytes, amqp_cstring_bytes(queue.c_str()), 0, 0, &props, body) !=
          AMQP_STATUS_OK) {
        fmt::print(stderr, "amqp_perf: publish failed\n");
        return 1;
      }
      outstanding.emplace(next_seq++, Clock::now());
      if ((next_seq & 63) == 0) read_confirms(false);
    }
    read_confirms(true);
  }
  const auto drain_until = Clock::now() + std::chrono::seconds(30);
  while (!outstanding.empty() && Clock::now() < drain_until) read_confirms(true);
  const double publish_s = std::chrono::duration<double>(Clock::now() - origin).count();
  const uint64_t sent = next_seq - 1;
  // Let the consumer catch up with what was confirmed, within a bound.
  const auto catch_up = Clock::now() + std::chrono::seconds(30);
  while (consumed.load() < confirmed && Clock::now() < catch_up) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const double total_s = std::chrono::duration<double>(Clock::now() - origin).count();
  stop = true;
  consumer.join();
  close(pub);
  const double pub_rate = static_cast<double>(confirmed) / publish_s;
  const double con_rate = static_cast<double>(consumed.load()) / total_s;
  if (json) {
    fmt::print("{{\"sent\":{},\"confirmed\":{},\"nacked\":{},\"consumed\":{},\"size\":{},\"window\":{},"
               "\"publish_msgs_per_s\":{:.1f},\"consume_msgs_per_s\":{:.1f},\"confirm_latency_ms\":{{\"p50\":{:.3f},"
               "\"p99\":{:.3f},\"max\":{:.3f}}},\"end_to_end_latency_ms\":{{\"p50\":{:.3f},\"p99\":{:.3f},"
               "\"max\":{:.3f}}}}}\n",
               sent, confirmed, nacked, consumed.load(), size, window, pub_rate, con_rate,
               ms(latency_us.percentile(50)), ms(latency_us.percentile(99)), ms(latency_us.max()),
               ms(end_to_end_us.percentile(50)), ms(end_to_end_us.percentile(99)), ms(end_to_end_us.max()));
  } else {
    fmt::print("sent {} confirmed {} nacked {} consumed {}\n", sent, confirmed, nacked, consumed.load());
    fmt::print("publish {:.0f} msg/s ({:.1f} MiB/s), consume {:.0f} msg/s, confirm p50 {:.2f} ms p99 {:.2f} ms, "
               "end to end p50 {:.2f} ms p99 {:.2f} ms\n",
               pub_rate, pub_rate * static_cast<double>(size) / (1 << 20), con_rate, ms(latency_us.percentile(50)),
               ms(latency_us.percentile(99)), ms(end_to_end_us.percentile(50)), ms(end_to_end_us.percentile(99)));
  }
  return nacked == 0 ? 0 : 1;
}
