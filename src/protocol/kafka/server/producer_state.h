// Idempotent producers (KIP-98): what the broker remembers per producer id
// and partition so that a retried batch is written once and a gap in the
// sequence is refused.
//
// A producer gets its id (and epoch 0) from InitProducerId and numbers its
// batches per partition: baseSequence is the first record's number, the
// last record's is baseSequence + lastOffsetDelta (wrapping at INT32_MAX).
// For each (partition, producer id) we keep the epoch, the last sequence
// appended and the last five batches with the offset each was written at,
// the window Kafka's clients keep in flight. A batch that matches one of
// them is a duplicate: answered with its original offset, not written
// again. A batch's offset is known once it is stored (an append may wait
// in the topic or the log first): a duplicate of a batch still being
// written waits for it. A batch that does not start right after the last sequence is out
// of order; an older epoch is fenced. The first batch of a producer on a
// partition is taken at any sequence (after a broker restart the state is
// gone, and Kafka's brokers accept then too), and so is a batch ahead of
// the last sequence once the partition was loaded here again: it may have
// been on another member meanwhile, which took sequences this one never
// saw (retries of batches kept here are still answered as duplicates).
// A batch whose append fails is taken back, never the producer's whole
// state: a later batch taken at any sequence would be answered with a
// success, and a Kafka client takes that as the acknowledgement of every
// batch before it, the failed one too.
//
// Memory only: after a broker restart a retry of a batch written just
// before it is written again (Kafka keeps this state in snapshots beside
// the log). Entries idle for a day are dropped, like Kafka's
// producer.id.expiration.ms, and each reactor keeps at most kMaxStates
// (least recently used dropped first).
//
// Threads: a partition's state is read and written only on its topic's
// home reactor, around the append, so each reactor keeps its own
// ProducerStates (KafkaService::producer_states()) and no lock is taken.
// ProducerIds hands out ids from any thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "protocol/kafka/errors.h"

namespace magnetar::protocol::kafka {

struct SequencedBatch {
  int64_t producer_id = -1;
  int16_t epoch = -1;
  int32_t first_sequence = -1;
  int32_t last_sequence = -1;
};

struct SequenceCheck {
  ErrorCode error = kNone;   // kNone: append (or duplicate when `duplicate`)
  bool duplicate = false;    // already taken: written at `base_offset`, or
  int64_t base_offset = -1;  // -1 while still being written (when_written)
  std::string why;
};

// What DescribeProducers shows of one producer on one partition.
struct ProducerSnapshot {
  int64_t producer_id = -1;
  int16_t epoch = 0;
  int32_t last_sequence = -1;  // of the last batch taken (also while it is being written)
  int64_t last_used_ms = 0;    // wall clock of the last batch taken or retried
};

// How a retry of a batch still being written learns the batch's offset.
using WrittenCallback = std::function<void(ErrorCode, int64_t base_offset)>;

class ProducerStates {
 public:
  // At most `max_states` (partition, producer id) pairs are kept: a client
  // that makes a new idempotent producer for every few messages (a
  // function per request, say) would otherwise grow them for a day. Past
  // it the least recently used tenth is dropped (a retry of one of their
  // old batches may then be written twice, as after a restart) and
  // magnetar_kafka_producer_states_evicted_total counts them.
  explicit ProducerStates(size_t max_states = kMaxStates) : max_states_(std::max<size_t>(max_states, 1)) {}

  // Checks `batch` from `partition` (a Pulsar topic or partition name) and,
  // when it is to be appended, records it as being written: the caller
  // reports the outcome with written() or failed(). `load` is the topic's
  // (broker::Topic::load()): under another load than the one kept, a batch
  // ahead of the last sequence is taken, not refused as out of order.
  SequenceCheck check_and_record(const std::string& partition, const SequencedBatch& batch, int64_t now_ms,
                                 uint64_t load = 0);
  // The batch check_and_record took was stored at `base_offset`: retries
  // of it are answered with that offset, those waiting too. False when an
  // earlier batch's failure took this one back (failed()) meanwhile: it is
  // stored behind a gap, and must not be answered as a success (a client
  // takes a success as the acknowledgement of every batch before it).
  bool written(const std::string& partition, const SequencedBatch& batch, int64_t base_offset);
  // A duplicate of a batch still being written (check_and_record said so):
  // `done` runs with the batch's offset once it is written, or with
  // KAFKA_STORAGE_ERROR (retriable) if its append fails. False when no such
  // batch is being written (`done` is not kept).
  bool when_written(const std::string& partition, const SequencedBatch& batch, WrittenCallback done);
  // The append of `batch` (taken by check_and_record) failed: the
  // producer's state goes back to just before it, as if it had never been
  // taken, so that its retry is taken and a later batch is out of order
  // until then (as a Kafka broker keeps only what it stored). Batches
  // taken after it are taken back too (a log refuses the adds after a
  // failed one); retries waiting for any of them are answered
  // KAFKA_STORAGE_ERROR.
  void failed(const std::string& partition, const SequencedBatch& batch);
  size_t size() const { return states_.size(); }
  // The producers with state on `partition`, by producer id.
  std::vector<ProducerSnapshot> producers_of(const std::string& partition) const;

  static constexpr size_t kRememberedBatches = 5;
  static constexpr int64_t kExpiryMs = 24LL * 3600 * 1000;
  static constexpr size_t kMaxStates = 50'000;  // per reactor

 private:
  struct Written {
    int32_t first;
    int32_t last;
    int64_t base_offset;                // -1 while being written
    std::vector<WrittenCallback> waiting;  // retries that came meanwhile
  };
  struct State {
    uint64_t load = 0;  // the topic's when this was kept
    int16_t epoch = 0;
    int32_t last_sequence = -1;
    int64_t last_used_ms = 0;
    std::vector<Written> recent;  // oldest first; at most kRememberedBatches
  };
  static std::string key(const std::string& partition, int64_t producer_id);
  Written* find(const std::string& partition, const SequencedBatch& batch);
  // Answers the retries waiting for `batches` (no longer remembered) with
  // a retriable error.
  // Answers the retries waiting for `batch` (or each of `batches`) with
  // KAFKA_STORAGE_ERROR, which clients retry.
  static void fail_waiting(Written& batch);
  static void fail_waiting(std::vector<Written>& batches);
  void expire_idle(int64_t now_ms);
  // Over max_states_: drops the least recently used tenth, all but `keep`.
  void evict_oldest(const std::string& keep, int64_t now_ms);

  const size_t max_states_;
  std::unordered_map<std::string, State> states_;
  int64_t next_expiry_ms_ = 0;
  int64_t last_evict_warn_ms_ = INT64_MIN / 2;
};

// Producer ids not handed out before, across restarts and across the
// members of a cluster: milliseconds since 2024 (41 bits), the member's
// Kafka broker id (10 bits: ids from 1024 on share the slots of those
// below), and a counter (12 bits) that moves to the next millisecond
// when it runs out. Every id is larger than those the earlier scheme
// (the clock shifted left 12 bits) handed out. Any thread.
class ProducerIds {
 public:
  explicit ProducerIds(int32_t node = 0) : node_(static_cast<uint32_t>(node) & kNodeMask) {}
  int64_t next(int64_t now_ms);

  static constexpr int64_t kEpochMs = 1'704'067'200'000;  // 2024-01-01
  static constexpr int kCounterBits = 12;
  static constexpr int kNodeBits = 10;
  static constexpr uint32_t kNodeMask = (1u << kNodeBits) - 1;

 private:
  const uint32_t node_;
  std::atomic<int64_t> last_{0};
};

}  // namespace magnetar::protocol::kafka
