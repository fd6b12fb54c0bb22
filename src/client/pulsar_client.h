// PulsarClient: a small blocking Pulsar client over one connection.
//
// For the command line (`magnetar produce`, `magnetar consume`) and tests:
// one thread drives it, every call waits for its answer with a bounded
// timeout. Applications with many producers and consumers want an
// asynchronous client; this one keeps the wire logic small and readable.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "client/message.h"
#include "client/transport.h"
#include "common/bytes.h"
#include "common/result.h"
#include "protocol/pulsar/frame.h"

namespace magnetar::client {

struct ReceivedMessage {
  MessageId id;
  std::string payload;
  std::map<std::string, std::string> properties;
  std::string key;
  std::string producer;
  uint64_t publish_time_ms = 0;
  uint64_t event_time_ms = 0;
  uint32_t redelivery_count = 0;
  // Why the payload could not be read (unknown compression, corrupt batch);
  // empty when it could. Such a message is still delivered and can be acked.
  std::string error;
};

enum class SubscriptionType { kExclusive = 0, kShared = 1, kFailover = 2, kKeyShared = 3 };

struct ClientOptions {
  std::chrono::milliseconds timeout{10000};  // every wait is bounded by this
  std::string token;  // sent in CONNECT (auth method "token") when not empty
  TlsOptions tls;     // enabled by a pulsar+ssl:// service URL too
};

class PulsarClient {
 public:
  // Connects to "pulsar://host:port", "pulsar+ssl://host:port" (TLS;
  // port 6651 by default) or "host:port" and performs CONNECT.
  static common::Result<std::unique_ptr<PulsarClient>> connect(const std::string& service_url,
                                                               ClientOptions options = {});
  ~PulsarClient();
  PulsarClient(const PulsarClient&) = delete;
  PulsarClient& operator=(const PulsarClient&) = delete;

  const std::string& server_version() const { return server_version_; }

  // The service URL that serves `topic`: asks `service_url` (a cluster member
  // names the topic's owner; a standalone node itself), following redirects
  // a few hops. The TLS URL when `service_url` is pulsar+ssl://.
  static common::Result<std::string> service_url_for(const std::string& service_url, const std::string& topic,
                                                     ClientOptions options = {});
  // LOOKUP on this connection: the answer's broker URL (TLS or plain, as
  // asked) and whether the client should look up again there (a Redirect).
  common::Result<std::pair<std::string, bool>> lookup(const std::string& topic, bool tls);

  // Registers a producer; returns its id. The broker names it when `name` is empty.
  common::Result<uint64_t> create_producer(const std::string& topic, const std::string& name = "");
  // Sends one message and waits for its receipt.
  common::Result<MessageId> send(uint64_t producer, std::string_view payload,
                                 const std::map<std::string, std::string>& properties = {},
                                 std::string_view key = {});
  // Sends `payloads` back to back, `window` in flight at most, and waits for
  // every receipt. Returns how many were stored.
  common::Result<size_t> send_many(uint64_t producer, const std::vector<std::string>& payloads, size_t window = 1000);
  common::Status close_producer(uint64_t producer);

  // Attaches a consumer and grants it `permits`; returns its id.
  common::Result<uint64_t> subscribe(const std::string& topic, const std::string& subscription,
                                     SubscriptionType type, bool earliest, uint32_t permits = 1000,
                                     const std::string& consumer_name = "");
  // A reader: a non-durable subscription that starts at `start` (the first
  // message after it is delivered, or `start` itself when `inclusive`;
  // nullopt: at the beginning when `earliest`, else at the end). As Pulsar
  // brokers do, the broker delivers from `start`'s entry on and the client
  // drops what lies before the start. Read it with receive(); close it
  // with close_consumer().
  common::Result<uint64_t> create_reader(const std::string& topic, std::optional<MessageId> start, bool earliest,
                                         uint32_t permits = 1000, bool inclusive = false);
  // Subscriptions and readers made from now on read the topic's compacted
  // view (CommandSubscribe.read_compacted): persistent topics, Exclusive
  // and Failover only. Messages a compaction removed from a batch
  // (compacted_out) are never delivered, whatever this says.
  void set_read_compacted(bool on) { read_compacted_ = on; }
  // The next message for `consumer`, or kTimeout after `wait`. Batches are
  // split into their messages. Grants more permits as messages are taken.
  common::Result<ReceivedMessage> receive(uint64_t consumer, std::chrono::milliseconds wait);
  common::Status ack(uint64_t consumer, const MessageId& id);
  // Acknowledges every message up to and including `id`'s entry (Exclusive
  // and Failover subscriptions). Use it on the last message of an entry.
  common::Status ack_cumulative(uint64_t consumer, const MessageId& id);
  common::Status close_consumer(uint64_t consumer);

 private:
  friend class Producer;  // takes over the connection once its producer exists
  PulsarClient(std::unique_ptr<Transport> transport, ClientOptions options);
  common::Status write_all(const common::Slice& bytes);
  // Reads until a frame arrives or `deadline`; handles PING and queues
  // MESSAGE frames. Returns false on timeout (status in *st), true with a frame.
  common::Status read_frame(std::chrono::steady_clock::time_point deadline, protocol::pulsar::Frame* out);
  // Waits for the answer to request `request_id` (SUCCESS, ERROR, ...).
  common::Result<protocol::pulsar::proto::BaseCommand> await_request(uint64_t request_id);
  void queue_message(const protocol::pulsar::Frame& frame);
  // FLOW for what `consumer` took (received or dropped) once that is half
  // its window.
  common::Status maybe_flow(uint64_t consumer);
  common::Status request(protocol::pulsar::proto::BaseCommand& command);
  common::Result<uint64_t> subscribe_with(protocol::pulsar::proto::BaseCommand& command, uint32_t permits);

  std::unique_ptr<Transport> transport_;
  ClientOptions options_;
  bool read_compacted_ = false;
  protocol::pulsar::FrameDecoder decoder_;
  common::SliceChain input_;
  std::string server_version_;
  uint64_t next_request_ = 1;
  uint64_t next_producer_ = 1;
  uint64_t next_consumer_ = 1;
  std::map<uint64_t, uint64_t> sequence_;                 // producer -> next sequence id
  std::map<uint64_t, std::string> producer_names_;
  std::map<uint64_t, std::deque<ReceivedMessage>> inbox_;  // consumer -> messages
  std::map<uint64_t, uint32_t> taken_;                     // consumer -> taken since last FLOW
  std::map<uint64_t, uint32_t> permits_;                   // consumer -> permits granted per FLOW
  // (consumer, ledger, entry) -> which messages of a batch were acked so far
  std::map<std::tuple<uint64_t, uint64_t, uint64_t>, std::vector<bool>> batch_acks_;
  struct ReaderStart {
    MessageId id;
    bool inclusive = false;
  };
  std::map<uint64_t, ReaderStart> reader_starts_;          // reader -> where it starts (create_reader)
  std::deque<protocol::pulsar::Frame> pending_;            // frames read while waiting for another
};

}  // namespace magnetar::client
