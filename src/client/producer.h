// Producer: an asynchronous Pulsar producer on a connection of its own.
//
// send_async() queues a message and returns; a background I/O thread sends
// batches and matches SEND_RECEIPTs to them by sequence id, calling each
// message's callback (on the I/O thread, which callbacks must not block).
// Batching follows Pulsar clients: a batch goes out when it holds
// max_messages or max_bytes, or max_delay (1 ms) after its first message.
// Up to max_pending_messages are unacknowledged at once; send_async() waits
// for room beyond that (back-pressure), at most send_timeout.
//
// Threads: send_async, flush and close may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/batch_container.h"
#include "client/compression.h"
#include "client/message.h"
#include "client/pulsar_client.h"
#include "common/result.h"
#include "common/status.h"

namespace magnetar::client {

struct ProducerOptions {
  std::string topic;
  std::string name;  // empty: the broker names it
  bool batching = true;
  BatchLimits batch;
  uint32_t max_pending_messages = 1000;
  CompressionType compression = protocol::pulsar::proto::NONE;
  std::chrono::milliseconds send_timeout{30000};
  // When set, called on the I/O thread with each receipt's round trip: from
  // its SEND frame made (a batch sealed) to the receipt read. Apart from the
  // wait for the socket, what the network and the broker took, without the
  // batching delay or the sender's own waits.
  std::function<void(std::chrono::steady_clock::duration)> on_round_trip;
};

class Producer {
 public:
  static common::Result<std::unique_ptr<Producer>> create(const std::string& service_url, ProducerOptions options,
                                                          ClientOptions client_options = {});
  ~Producer();  // closes, failing what is still unacknowledged
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;

  // Queues `message` (its bytes are copied before this returns). `done` runs
  // once with the message's id or the reason it was not stored. Errors
  // returned here (closed producer, no room within send_timeout) mean `done`
  // will not run.
  common::Status send_async(const OutgoingMessage& message, SendCallback done);
  // Sends and waits for the receipt.
  common::Result<MessageId> send(const OutgoingMessage& message);
  // Sends the open batch now and waits until every message sent so far is
  // acknowledged or failed (at most send_timeout).
  common::Status flush();
  // Flushes, then closes the producer on the broker and the connection.
  common::Status close();

  const std::string& name() const { return name_; }
  // Messages waiting for a receipt, and every message sent/acknowledged.
  uint64_t pending() const;

 private:
  struct InFlight {
    uint64_t sequence_id = 0;  // of the first message
    int32_t count = 0;
    bool batched = false;
    std::chrono::steady_clock::time_point sent;
    std::vector<SendCallback> callbacks;
  };

  Producer(std::unique_ptr<PulsarClient> client, uint64_t producer_id, ProducerOptions options);
  struct Outgoing {
    common::Slice frame;
    uint64_t ticket = 0;
  };
  // Seals the open batch into a SEND frame and puts it in flight. Caller holds mu_.
  common::Result<Outgoing> seal_locked(std::chrono::steady_clock::time_point now);
  // A SEND frame for `count` messages from `sequence_id` with this payload.
  common::Result<common::Slice> send_frame(uint64_t sequence_id, int32_t count, bool batched,
                                           std::string_view payload, const OutgoingMessage* single);
  // Releases `lock` (on mu_) and writes `out` once every frame with an
  // earlier ticket is written, so sequence ids reach the broker in order.
  common::Status write_in_order(std::unique_lock<std::mutex>& lock, Outgoing out);
  void io_loop();
  void on_receipt(const protocol::pulsar::proto::BaseCommand& command);
  void fail_all(const common::Status& why);
  void wake();

  std::unique_ptr<PulsarClient> client_;
  const uint64_t producer_id_;
  const ProducerOptions options_;
  std::string name_;
  int wake_fd_ = -1;

  mutable std::mutex mu_;
  std::condition_variable room_;  // pending_messages_ fell, or the producer broke
  BatchContainer batch_;
  std::deque<InFlight> in_flight_;
  uint64_t pending_messages_ = 0;
  uint64_t next_sequence_ = 0;
  common::Status broken_;  // set once the connection failed or close() ran
  bool closing_ = false;
  // Frames take a ticket under mu_ and are written in ticket order.
  std::mutex write_mu_;
  std::condition_variable write_turn_;
  uint64_t next_ticket_ = 0;
  uint64_t serving_ticket_ = 0;

  std::atomic<bool> stop_{false};
  std::thread io_;
};

}  // namespace magnetar::client
