// Consumer: one client's attachment to a subscription, protocol-neutral.
//
// A protocol handler implements ConsumerSink and gives the broker permits
// (how many more messages the client can take, as Pulsar's FLOW does); the
// subscription's dispatcher hands it entries while it has permits. Kafka and
// AMQP handlers do the same through their own flow control.
//
// Permits are the client's word, not proof that it reads. A handler whose
// connection buffers what it is handed can also give the consumer a
// delivery credit (ConsumerOptions::delivery_credit): bytes of entries,
// each costing delivery_cost(), that it may be handed before the handler
// gives more (Subscription::add_credit), which it does as what it was
// handed leaves for the client. A client that stops reading then holds
// the node to that credit, plus one entry, whatever permits it granted.
//
// Threads: a Consumer and its Subscription live on the topic's home reactor.
// ConsumerSink methods are called there; a sink whose connection lives on
// another reactor posts to it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "broker/client_info.h"
#include "broker/tenant_usage.h"
#include "common/bytes.h"
#include "common/status.h"
#include "ledger/entry_codec.h"
#include "ledger/position.h"

namespace magnetar::broker {

enum class SubscriptionType { kExclusive, kShared, kFailover, kKeyShared };
enum class InitialPosition { kLatest, kEarliest };

// Key_Shared: how consumers get their hash ranges (key_shared_selector.h).
enum class KeySharedMode { kAutoSplit, kSticky };
// An inclusive range of key hash slots, [start, end] within [0, 65535].
struct HashRange {
  uint32_t start = 0;
  uint32_t end = 0;
  bool operator==(const HashRange&) const = default;
};

std::string_view subscription_type_name(SubscriptionType t);  // Pulsar's: "Exclusive", "Shared", ...

// One entry handed to a consumer: a Slice of the stored bytes, no copy.
struct Delivery {
  ledger::Position position;
  ledger::MessageHeader header;
  common::Slice payload;
  uint32_t redelivery_count = 0;
  // Bitmap of messages of a batch entry already acknowledged (bit i =
  // message i), so the client skips them; empty when none.
  std::vector<uint64_t> batch_acks;
};

// What an entry handed to a consumer costs against its delivery credit:
// its payload and a fixed amount for what its delivery holds besides (the
// Delivery, a protocol's frame head), so that small entries count too.
inline constexpr int64_t kDeliveryOverheadBytes = 256;
inline int64_t delivery_cost(size_t payload_bytes) {
  return static_cast<int64_t>(payload_bytes) + kDeliveryOverheadBytes;
}

class ConsumerSink {
 public:
  virtual ~ConsumerSink() = default;
  // Entries for this consumer, in order. Never more messages than the
  // permits given, except that one batch entry may overshoot them; with a
  // delivery credit, never more delivery_cost() than the credit given,
  // except that one entry may overshoot it.
  virtual void deliver(std::vector<Delivery> entries) = 0;
  // The broker detached this consumer (topic closed or deleted, subscription
  // removed). The sink must not call its Consumer after this.
  virtual void closed(const common::Status& why) = 0;
  // Failover: this consumer became (or stopped being) the one that receives.
  virtual void active_changed(bool active) {}
};

struct ConsumerOptions {
  std::string subscription;
  SubscriptionType type = SubscriptionType::kExclusive;
  std::string consumer_name;
  int32_t priority = 0;  // failover: lower is preferred
  InitialPosition initial_position = InitialPosition::kLatest;
  bool durable = true;   // false: a reader; the cursor is not persisted
  // A new non-durable subscription on a persistent topic starts right after
  // this position instead of at initial_position (Pulsar's
  // start_message_id): delivery begins with the entry after it. Before the
  // log's first entry it means the earliest; past its last entry,
  // initial_position decides. Ignored for a subscription that exists.
  std::optional<ledger::Position> start_after;
  // > 0: before the consumer attaches, the subscription moves back to the
  // first message published at most this many ms ago (Pulsar's
  // start_message_rollback_duration_sec). Persistent topics only.
  int64_t rollback_ms = 0;
  // Key_Shared only. Every consumer of a subscription uses the same mode.
  KeySharedMode key_shared_mode = KeySharedMode::kAutoSplit;
  std::vector<HashRange> hash_ranges;  // kSticky: the slots this consumer owns
  // Key_Shared: deliver a key's entries to this consumer even while another
  // consumer still holds earlier entries of that key unacknowledged.
  bool allow_out_of_order = false;
  ClientInfo client{};
  // Bytes of entries (delivery_cost) the consumer may be handed before
  // its handler adds credit (Subscription::add_credit); -1: no credit
  // bound, permits alone decide.
  int64_t delivery_credit = -1;
  // Read the topic through its compacted view (Log::read_compacted):
  // persistent topics, Exclusive and Failover subscriptions only.
  bool read_compacted = false;
  // Make the subscription a replicated one (Pulsar's
  // replicate_subscription_state): its acknowledgements reach the other
  // clusters the topic is replicated to. Never turns it off.
  bool replicate_state = false;
};

class Consumer {
 public:
  Consumer(uint64_t id, ConsumerOptions options, ConsumerSink* sink)
      : id_(id),
        options_(std::move(options)),
        sink_(sink),
        credit_bound_(options_.delivery_credit >= 0),
        credit_(std::max<int64_t>(0, options_.delivery_credit)) {}

  uint64_t id() const { return id_; }
  const ConsumerOptions& options() const { return options_; }
  // The consumer's place among its tenant's consumers, given back with it.
  void hold(TenantSlot slot) { tenant_slot_ = std::move(slot); }
  const std::string& name() const { return options_.consumer_name; }
  ConsumerSink* sink() const { return sink_; }
  int64_t permits() const { return permits_; }
  // The delivery credit left (below zero after an entry overshot it);
  // meaningful only with a delivery_credit.
  int64_t credit() const { return credit_; }

  // Counters for stats.
  uint64_t messages_out() const { return messages_out_; }
  uint64_t bytes_out() const { return bytes_out_; }
  size_t unacked_entries() const { return pending_.size(); }
  // Messages in those entries (a batch counts its messages).
  uint64_t unacked_messages() const { return unacked_messages_; }
  // Shared and Key_Shared: dispatch to this consumer stopped because it
  // reached the subscription's max unacked messages per consumer; it resumes
  // once acknowledgements bring it down to half of that.
  bool blocked_on_unacked() const { return blocked_on_unacked_; }

 private:
  TenantSlot tenant_slot_;
  friend class Subscription;
  uint64_t id_;
  ConsumerOptions options_;
  ConsumerSink* sink_;
  int64_t permits_ = 0;
  bool credit_bound_;
  int64_t credit_;
  struct Pending {
    uint32_t deliveries = 0;  // how many times the entry was delivered
    uint32_t messages = 1;    // messages it still counts as unacknowledged
    uint32_t slot = 0;        // Key_Shared: the hash slot of its key
    uint32_t batch_size = 1;  // messages in the entry
  };
  // Entries delivered and not yet acknowledged. Shared and key-shared
  // subscriptions hand these to other consumers when this one goes away.
  // Changed only through Subscription::add_pending / drop_pending, which
  // keep the counters below in step.
  std::map<ledger::Position, Pending> pending_;
  std::map<uint32_t, uint32_t> pending_slots_;  // Key_Shared: slot -> entries pending
  uint64_t unacked_messages_ = 0;
  bool blocked_on_unacked_ = false;
  uint64_t messages_out_ = 0;
  uint64_t bytes_out_ = 0;
};

}  // namespace magnetar::broker
