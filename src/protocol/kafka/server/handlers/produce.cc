// Produce: each partition's record batches (message format v2, CRC32C
// checked) become Pulsar batch entries on the topic's log, published by a
// producer this connection registers per topic. acks=0 gets no response;
// acks=1 and acks=-1 are answered once the entries are stored (this node is
// the only replica, so both mean "durable here"). Batches of idempotent
// producers are checked against their sequence numbers first
// (producer_state.h): a retried batch is answered with its first offset and
// not written twice.
#include <chrono>
#include <climits>

#include "broker/publish_stages.h"
#include "common/clock.h"
#include "common/stage_timing.h"
#include "protocol/kafka/convert.h"
#include "protocol/pulsar/frame.h"
#include "protocol/kafka/errors.h"
#include "protocol/kafka/server/kafka_connection.h"
#include "protocol/kafka/server/offsets.h"
#include "protocol/kafka/server/producer_state.h"

namespace magnetar::protocol::kafka {

using common::Result;
using common::Status;
using broker::PublishLimits;

namespace {

struct PartitionResult {
  std::string topic;
  int32_t partition = 0;
  ErrorCode error = kNone;
  int64_t base_offset = -1;
  int64_t log_start = -1;
  std::string message;
};

struct ProduceState {
  Request request;
  bool needs_answer = true;
  std::vector<PartitionResult> results;
  size_t left = 0;
};

void answer(KafkaConnection& c, ProduceState& state) {
  if (!state.needs_answer) return c.respond_none(state.request);
  c.produce_answered();
  Struct resp = state.request.response();
  Struct* topic = nullptr;
  for (const PartitionResult& r : state.results) {
    if (topic == nullptr || topic->str("Name") != r.topic) {
      topic = &resp.add("Responses");
      topic->set("Name", r.topic);
    }
    auto& p = topic->add("Partitions");
    p.set("PartitionIndex", int64_t{r.partition});
    p.set("ErrorCode", int64_t{r.error});
    p.set("BaseOffset", r.base_offset);
    p.set("LogAppendTimeMs", int64_t{-1});
    p.set("LogStartOffset", r.log_start);
    if (!r.message.empty()) p.set("ErrorMessage", r.message);
  }
  // Over a publish rate limit the connection is muted for this long
  // (KIP-219: the client waits as well before it sends again).
  resp.set("ThrottleTimeMs", c.throttle_time_ms());
  c.respond(state.request, resp);
}

void finish_one(KafkaConnection& c, const std::shared_ptr<ProduceState>& state) {
  if (--state->left == 0) answer(c, *state);
}

// On the topic's home reactor: publishes `entries` in order and reports the
// first one's offset (or the first error) to the connection. The offset is
// the one the log gave the first entry when it took it: an entry may wait
// (held by the topic, or in the log while it rolls a ledger over) behind
// others, so the log's next index when publishing says nothing.
// `marks` goes on to `done` with the storage figures of the last entry.
void publish_all(broker::Topic* topic, uint64_t producer_id, std::vector<ConvertedEntry> entries,
                 broker::PublishStages::Marks marks,
                 std::function<void(Result<int64_t>, int64_t, const broker::PublishStages::Marks&)> done) {
  int64_t log_start = log_start_offset(topic->log());
  struct Outcome {
    size_t left = 0;
    int64_t base = -1;
    Status failed;
    broker::PublishStages::Marks marks;
  };
  auto outcome = std::make_shared<Outcome>();
  outcome->left = entries.size();
  outcome->marks = marks;
  for (size_t k = 0; k < entries.size(); ++k) {
    ConvertedEntry& e = entries[k];
    topic->publish_appended(producer_id, std::move(e.header), std::move(e.entry),
                            [outcome, first = k == 0, log_start, done](Result<ledger::AppendedEntry> r) {
                              if (!r.is_ok() && outcome->failed.is_ok()) outcome->failed = r.status();
                              if (r.is_ok() && first) outcome->base = r->first_index;
                              if (--outcome->left > 0) return;
                              outcome->marks.take_add_timing();
                              if (!outcome->failed.is_ok()) return done(outcome->failed, log_start, outcome->marks);
                              done(outcome->base, log_start, outcome->marks);
                            });
  }
}

}  // namespace

void handle_produce(KafkaConnection& c, const Request& request) {
  broker::PublishStages::Marks marks;
  marks.received_ns = common::monotonic_ns();
  auto state = std::make_shared<ProduceState>();
  state->request = request;
  const int64_t acks = request.body.i("Acks");
  state->needs_answer = acks != 0;
  if (state->needs_answer) c.produce_waits();
  const bool bad_acks = acks != 0 && acks != 1 && acks != -1;
  const bool transactional = !request.body.is_null("TransactionalId");
  for (const auto& t : request.body.array("Topics")) {
    for (const auto& p : t.array("Partitions")) {
      PartitionResult r;
      r.topic = t.str("Name");
      r.partition = static_cast<int32_t>(p.i("PartitionIndex"));
      state->results.push_back(std::move(r));
    }
  }
  state->left = state->results.size() + 1;  // +1: released after the loop
  size_t index = 0;
  for (const auto& t : request.body.array("Topics")) {
    const std::string name = t.str("Name");
    auto topic = c.topic_for(name);
    for (const auto& p : t.array("Partitions")) {
      PartitionResult& result = state->results[index++];
      auto fail = [&](ErrorCode e, std::string why) {
        result.error = e;
        result.message = std::move(why);
        finish_one(c, state);
      };
      if (bad_acks) {
        fail(kInvalidRequiredAcks, "acks must be 0, 1 or -1");
        continue;
      }
      if (transactional) {
        fail(kInvalidRequest, "transactions are not served");
        continue;
      }
      if (!topic) {
        fail(kInvalidTopic, topic.status().message());
        continue;
      }
      const common::Slice* records = p.bytes("Records");
      if (records == nullptr || records->empty()) {
        fail(kCorruptMessage, "no records");
        continue;
      }
      auto batches = parse_record_set(*records);
      if (!batches) {
        fail(batches.status().code() == common::ErrorCode::kUnimplemented ? kUnsupportedCompressionType
                                                                           : kCorruptMessage,
             batches.status().message());
        continue;
      }
      // Kafka allows one batch per partition from an idempotent producer,
      // so its sequence numbers are checked batch by batch.
      SequencedBatch sequenced;
      if (!batches->empty() && (*batches)[0].producer_id >= 0) {
        const RecordBatch& b = (*batches)[0];
        if (batches->size() > 1 || b.records.empty()) {
          fail(kInvalidRecord, "an idempotent producer sends exactly one record batch per partition");
          continue;
        }
        sequenced = SequencedBatch{b.producer_id, b.producer_epoch, b.base_sequence,
                                   static_cast<int32_t>((int64_t{b.base_sequence} + b.records.back().offset_delta) %
                                                        (int64_t{INT32_MAX} + 1))};
      }
      auto [producer_id, producer_name] = c.producer_for(name, result.partition);
      std::vector<ConvertedEntry> entries;
      const int64_t now = common::wall_clock_ms();
      bool too_large = false;
      bool keyless = false;  // a compact topic refuses records without a key, as Kafka does
      for (const RecordBatch& b : *batches) {
        if (b.records.empty()) continue;
        for (const Record& r : b.records) keyless = keyless || !r.key;
        entries.push_back(batch_to_entry(b, now, producer_name, c.next_sequence(b.records.size())));
        // Pulsar consumers read the same entries: no larger than Pulsar's
        // largest message.
        too_large = too_large || entries.back().entry.size() > pulsar::kDefaultMaxMessageSize;
      }
      if (too_large) {
        fail(kMessageTooLarge, "a record batch is larger than the largest message (5 MiB)");
        continue;
      }
      if (entries.empty()) {
        fail(kCorruptMessage, "record batches without records");
        continue;
      }
      size_t slot = index - 1;
      int64_t messages = 0, bytes = 0;
      for (const ConvertedEntry& e : entries) {
        messages += e.header.messages;
        bytes += static_cast<int64_t>(e.entry.size());
      }
      // Charged here once this connection knows the partition's limits;
      // the first Produce to it is charged on the topic's home reactor.
      PublishLimits* known = c.publish_limits_for(name, result.partition);
      if (known != nullptr) c.charge_publish(*known, messages, bytes);
      auto run = [reply = c.replier(), state, slot, producer_id = producer_id, producer_name = producer_name,
                  client = c.client_info(request.header), charged = known != nullptr, messages, bytes, name,
                  partition = result.partition, entries = std::move(entries), sequenced, marks, keyless,
                  &service = c.service()](Result<broker::Topic*> t) mutable {
        auto report = [reply, state, slot](ErrorCode e, std::string why, int64_t base, int64_t start,
                                           const broker::PublishStages::Marks& marks = {}) {
          reply([state, slot, e, why = std::move(why), base, start, marks](KafkaConnection& conn) {
            PartitionResult& r = state->results[slot];
            r.error = e;
            r.message = why;
            r.base_offset = base;
            r.log_start = start;
            finish_one(conn, state);
            broker::PublishStages::of(broker::PublishProtocol::kKafka).record(marks);
          });
        };
        if (!t.is_ok()) return report(error_code(t.status()), t.status().message(), -1, -1);
        marks.at_topic_ns = common::monotonic_ns();
        broker::Topic* topic = *t;
        if (keyless && topic->cleanup_policy() != broker::CleanupPolicy::kDelete) {
          return report(kInvalidRecord,
                        "Compacted topic cannot accept message without key in topic partition " +
                            topic->name().to_string(), -1, -1);
        }
        Status added = topic->add_producer(producer_id, producer_name, client);
        if (!added.is_ok() && added.code() != common::ErrorCode::kAlreadyExists) {
          return report(error_code(added), added.message(), -1, -1);
        }
        reply([producer_id, name = topic->name()](KafkaConnection& conn) { conn.producer_on(producer_id, name); });
        // Refused before the sequence check, so that the refusal leaves an
        // idempotent producer's state as it was (and is final, not retried).
        if (const int64_t max = topic->max_message_bytes(); max >= 0) {
          for (const ConvertedEntry& e : entries) {
            if (static_cast<int64_t>(e.entry.size()) > max) {
              return report(kMessageTooLarge, topic->too_large(e.entry.size()), -1, -1);
            }
          }
        }
        std::string partition_name;
        if (sequenced.producer_id >= 0) {
          // On the topic's home reactor, so no publish to it comes between
          // the check and the append.
          partition_name = topic->name().to_string();
          ProducerStates& states = service.producer_states();
          const int64_t start = log_start_offset(topic->log());
          SequenceCheck seq =
              states.check_and_record(partition_name, sequenced, common::wall_clock_ms(), topic->load());
          if (seq.error != kNone) return report(seq.error, seq.why, -1, start);
          if (seq.duplicate && seq.base_offset >= 0) return report(kNone, "", seq.base_offset, start);
          if (seq.duplicate) {
            // A retry of a batch still being written: answered with its
            // offset once it is stored.
            auto answer = [report, start](ErrorCode e, int64_t base) {
              report(e, e == kNone ? "" : "the batch this retries was not stored", base, start);
            };
            if (!states.when_written(partition_name, sequenced, answer)) {
              report(kKafkaStorageError, "the batch this retries was not stored", -1, start);
            }
            return;
          }
        }
        if (!charged && topic->publish_limits() != nullptr) {
          int64_t wait_ns = topic->publish_limits()->charge(messages, bytes);
          reply([wait_ns, name, partition, limits = service.broker().publish_limits(topic->name())](
                    KafkaConnection& conn) {
            conn.remember_publish_limits(name, partition, limits);
            if (wait_ns > 0) conn.hold_input(wait_ns);
          });
        }
        publish_all(topic, producer_id, std::move(entries), marks,
                    [report, &service, partition_name, sequenced](Result<int64_t> base, int64_t start,
                                                                  const broker::PublishStages::Marks& marks) {
                      if (!base.is_ok()) {
                        if (sequenced.producer_id >= 0) service.producer_states().failed(partition_name, sequenced);
                        // Moved or closing: the client looks the leader up again. Anything
                        // else is the storage's, retriable.
                        const auto code = base.status().code();
                        const bool elsewhere = code == common::ErrorCode::kWrongNode ||
                                               code == common::ErrorCode::kUnavailable;
                        return report(elsewhere ? error_code(base.status()) : kKafkaStorageError,
                                      base.status().message(), -1, start);
                      }
                      if (sequenced.producer_id >= 0 &&
                          !service.producer_states().written(partition_name, sequenced, *base)) {
                        // Stored behind a batch that was not: a success would
                        // acknowledge that one too. The retry stores it again.
                        return report(kOutOfOrderSequenceNumber,
                                      "an earlier batch of this producer was not stored", -1, start);
                      }
                      report(kNone, "", *base, start, marks);
                    });
      };
      c.with_partition(name, result.partition, broker::TopicAction::kProduce, std::move(run));
    }
  }
  finish_one(c, state);
}

}  // namespace magnetar::protocol::kafka
