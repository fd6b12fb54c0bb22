// Fetch: record batches from each partition's fetch offset on, converted
// from the stored Pulsar entries (convert.h). Offsets are topic-wide message
// indexes: the entry holding the fetch offset is found from the log's
// message runs, and a batch may start before the fetch offset (clients skip
// the records before it, as with Kafka's own batches).
//
// min bytes / max wait: while less than MinBytes is available the request
// waits until MaxWaitMs has passed, looking again whenever a partition it
// reads at its end stores an entry (Topic::when_entries_added).
// Max bytes: each partition returns at most PartitionMaxBytes, and the
// response at most MaxBytes over its partitions in request order, whole
// batches only; the response's first batch always goes out whole, so a
// client makes progress (KIP-74).
// Dispatch limits (the topic's dispatchRate, the tenant's, and the
// subscriptionDispatchRate of the connection's group; Topic::FetchLimits):
// a partition reads at most as many entries as the limits have message
// tokens and charges what it handed out, into debt if need be, and the
// response's ThrottleTimeMs says how long until the debt is paid, or how
// long the limits held the request back, as Kafka's fetch quotas do. A partition whose limits are spent reads nothing
// and the request waits for their next token (within MaxWaitMs) before it
// looks again; that attempt reads at least one entry, so a fetch sharing a
// budget with busier readers is never starved. No fetch sessions: SessionId is always 0, so clients
// send full fetch requests.
// Skipped entries: one holding a chunk of a message a Pulsar producer sent in
// chunks (a Kafka record carries a whole message; counted in
// magnetar_kafka_chunks_skipped_total and logged once per message and
// fetch), and one that cannot be converted (it does not parse or
// decompress; a warning and magnetar_kafka_fetch_skipped_entries_total).
// A batch after them takes the consumer past their offsets; when the
// response would end on them, one control batch covers their offsets
// (record_batch.h write_skip_batch), which clients step over without handing
// the application anything. Left out instead, they would leave the consumer
// asking for the same offset forever (KafkaJS also takes a batch without
// records for nothing read, and asks again).
#include <algorithm>
#include <chrono>
#include <optional>
#include <set>

#include "common/logging.h"
#include "common/metrics.h"
#include "ledger/managed_ledger.h"
#include "protocol/kafka/convert.h"
#include "protocol/kafka/errors.h"
#include "protocol/kafka/server/kafka_connection.h"
#include "protocol/kafka/server/offsets.h"

namespace magnetar::protocol::kafka {

using common::Result;
using common::Slice;
using common::Status;
using Clock = std::chrono::steady_clock;

namespace {

// Entries read per partition and attempt.
constexpr size_t kMaxEntriesPerRead = 128;

common::Counter& skipped_entries_metric() {
  static common::Counter& skipped = common::MetricsRegistry::global().counter(
      "magnetar_kafka_fetch_skipped_entries_total",
      "Stored entries a Kafka Fetch could not convert to records, answered as a marker consumers skip");
  return skipped;
}

struct PartitionFetch {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  size_t max_bytes = 0;
  // The outcome of the latest attempt.
  ErrorCode error = kNone;
  int64_t high_watermark = -1;
  int64_t log_start = -1;
  Slice records;
  int64_t throttle_ns = 0;  // until the dispatch limits' debt is paid or a token comes
  bool held = false;        // the limits were spent: nothing was read
  bool waited = false;      // an earlier attempt was held: this one reads at least one entry
};

struct FetchState {
  Request request;
  std::vector<PartitionFetch> parts;
  Clock::time_point deadline;
  size_t min_bytes = 1;
  size_t max_bytes = 0;  // the whole response's
  size_t left = 0;
  uint64_t wakes_at_attempt = 0;  // KafkaConnection::wakes() when the attempt began
  std::optional<Clock::time_point> first_held;  // when the dispatch limits first held a partition back
};

// The whole record batches at the front of `records` that fit in `budget`.
Slice whole_batches_within(const Slice& records, size_t budget) {
  size_t end = 0;
  while (records.size() - end >= 12) {
    const uint8_t* p = records.data() + end + 8;
    size_t length = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | p[3];
    if (end + 12 + length > budget || end + 12 + length > records.size()) break;
    end += 12 + length;
  }
  return records.sub(0, end);
}

struct FetchedPartition {
  ErrorCode error = kNone;
  int64_t high_watermark = -1;
  int64_t log_start = -1;
  Slice records;
  int64_t throttle_ns = 0;
  bool held = false;
};

// What went out of a read: charged to the dispatch limits.
struct Taken {
  int64_t messages = 0;
  int64_t bytes = 0;
};

int64_t ceil_ms(int64_t ns) { return (ns + 999'999) / 1'000'000; }

void attempt(KafkaConnection& c, const std::shared_ptr<FetchState>& state);

void answer(KafkaConnection& c, FetchState& state) {
  Struct resp = state.request.response();
  int64_t throttle_ns = 0;
  for (const PartitionFetch& p : state.parts) throttle_ns = std::max(throttle_ns, p.throttle_ns);
  // The time the limits held this request back counts as throttled too.
  if (state.first_held) {
    throttle_ns = std::max<int64_t>(
        throttle_ns, std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - *state.first_held).count());
  }
  resp.set("ThrottleTimeMs", ceil_ms(throttle_ns));
  resp.set("ErrorCode", int64_t{kNone});
  resp.set("SessionId", int64_t{0});
  Struct* topic = nullptr;
  size_t total = 0;
  for (PartitionFetch& p : state.parts) {
    // The response's max bytes, over the partitions in request order; the
    // first batch of the response always goes out whole (KIP-74).
    if (total > 0 && total + p.records.size() > state.max_bytes) {
      p.records = whole_batches_within(p.records, state.max_bytes - std::min(total, state.max_bytes));
    }
    total += p.records.size();
    if (topic == nullptr || topic->str("Name") != p.topic) {
      topic = &resp.add("Responses");
      topic->set("Name", p.topic);
    }
    auto& out = topic->add("Partitions");
    out.set("PartitionIndex", int64_t{p.partition});
    out.set("ErrorCode", int64_t{p.error});
    out.set("HighWatermark", p.high_watermark);
    out.set("LastStableOffset", p.high_watermark);
    out.set("LogStartOffset", p.log_start);
    out.set("Records", p.records);
  }
  c.respond(state.request, resp);
}

void settle(KafkaConnection& c, const std::shared_ptr<FetchState>& state) {
  size_t bytes = 0;
  bool errors = false;
  int64_t held_ns = 0;  // the longest wait for a token among partitions the limits held
  for (auto& p : state->parts) {
    bytes += p.records.size();
    errors = errors || p.error != kNone;
    if (p.held) held_ns = std::max(held_ns, p.throttle_ns);
    p.waited = p.held;
  }
  const Clock::time_point now = Clock::now();
  if (bytes >= state->min_bytes || errors || now >= state->deadline) return answer(c, *state);
  // An entry was stored while this attempt read: look again now.
  if (c.wakes() != state->wakes_at_attempt) return attempt(c, state);
  Clock::time_point until = state->deadline;
  if (held_ns > 0) {
    until = std::min(until, now + std::chrono::nanoseconds(held_ns));
    if (!state->first_held) state->first_held = now;
  }
  c.park_fetch(until, [conn = &c, state]() { attempt(*conn, state); });
}

common::Counter& chunks_skipped_metric() {
  static common::Counter& skipped = common::MetricsRegistry::global().counter(
      "magnetar_kafka_chunks_skipped_total",
      "Entries holding one chunk of a chunked Pulsar message, left out of Kafka fetches");
  return skipped;
}

// Offsets a fetch skips (chunks, entries that cannot be converted): covered
// by one control batch (record_batch.h write_skip_batch) once the next batch
// or the end of the response comes, which clients step over without handing
// the application anything.
struct Skipped {
  int64_t first = 0;
  int64_t last = 0;
  int64_t time_ms = 0;
};

void cover(WireWriter& out, const std::optional<Skipped>& skipped) {
  if (skipped) write_skip_batch(out, skipped->first, skipped->last, skipped->time_ms);
}

// What `out` holds before `end`: a batch that went over the limit is cut off
// again. Offsets skipped between the last batch kept and the one cut off are
// still covered, so the next fetch does not read them again.
Slice cut_off(WireWriter& out, size_t end, const std::optional<Skipped>& skipped) {
  Slice all = out.finish();
  if (!skipped) return all.sub(0, end);
  WireWriter kept(end + 128);
  kept.raw(all.data(), end);
  cover(kept, skipped);
  return kept.finish();
}

// Converts entries to batches until `max_bytes` (the first batch always);
// `sent` gets the positions of the entries that went in. Chunks and entries
// that cannot be converted are skipped (see the top of this file); `topic`
// names the partition in the log.
Slice to_batches(const std::string& topic, const std::vector<ledger::LedgerEntry>& entries, size_t max_bytes,
                 std::vector<ledger::Position>* sent, Taken& taken) {
  WireWriter out(4096);
  std::optional<Skipped> skipped;  // offsets skipped after the last batch
  std::set<std::string> logged;    // chunked messages named in the log already
  auto skip = [&](const ledger::LedgerEntry& e) {
    const int64_t last = e.header.first_index + std::max<int64_t>(e.header.messages, 1) - 1;
    if (!skipped) skipped = Skipped{e.header.first_index, last, e.header.publish_time_ms};
    skipped->last = last;
    skipped->time_ms = e.header.publish_time_ms;
  };
  for (const auto& e : entries) {
    if (out.size() > 0 && out.size() >= max_bytes) break;
    size_t before = out.size();
    auto appended = append_entry_as_batch(e.header, e.payload, out);
    if (!appended.is_ok()) {
      if (e.header.messages == 0) continue;  // it holds no offsets
      MLOG_WARN("kafka fetch: {} entry {}:{} (offsets {}..{}) cannot be converted to records and is skipped: {}",
                topic, e.position.ledger, e.position.entry, e.header.first_index,
                e.header.first_index + e.header.messages - 1, appended.status().message());
      skipped_entries_metric().inc();
      skip(e);
      continue;
    }
    if (const auto& chunk = *appended) {
      chunks_skipped_metric().inc();
      if (logged.insert(chunk->uuid).second) {
        MLOG_WARN("kafka fetch: {} offset {} holds chunk {} of {} of Pulsar message {}; Kafka records carry whole "
                  "messages only, so its chunks are skipped",
                  topic, e.header.first_index, chunk->id, chunk->count, chunk->uuid);
      }
      skip(e);
      continue;
    }
    // Over the limit with a later batch: cut it off again.
    if (before > 0 && out.size() > max_bytes) return cut_off(out, before, skipped);
    skipped.reset();  // a batch after skipped offsets takes the consumer past them
    if (sent != nullptr) sent->push_back(e.position);
    taken.messages += e.header.messages;
    taken.bytes += static_cast<int64_t>(e.payload.size());
  }
  cover(out, skipped);
  return out.finish();
}

// On the topic's home reactor.
// `traced`, when tracing is on for the topic: called (on the home reactor)
// with the positions of the entries that went out. `limits` are charged
// what went out; `at_least_one`: read an entry even when they are spent.
void read_partition(broker::Topic* topic, int64_t offset, size_t max_bytes, broker::Topic::FetchLimits limits,
                    bool at_least_one, std::function<void(FetchedPartition)> done,
                    std::function<void(std::vector<ledger::Position>)> traced) {
  ledger::Log& log = topic->log();
  FetchedPartition r;
  r.high_watermark = high_watermark(log);
  r.log_start = log_start_offset(log);
  const auto& chain = log.chain();
  if (offset == r.high_watermark) return done(r);
  if (offset > r.high_watermark || offset < r.log_start) {
    r.error = kOffsetOutOfRange;
    return done(r);
  }
  broker::DispatchAllowance allow = limits.allowance(broker::limiter_now_ns());
  if (!allow.allowed()) {
    if (!at_least_one) {
      r.held = true;
      r.throttle_ns = std::max<int64_t>(1, allow.wait_ns);
      return done(r);
    }
    allow = broker::DispatchAllowance{1, INT64_MAX, 0};
  }
  // The first batch goes out whole even past the bytes allowance.
  max_bytes = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(max_bytes), allow.bytes));
  const auto n = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(kMaxEntriesPerRead), allow.messages));
  auto answer = [topic_name = topic->name().to_string(), r, max_bytes, limits, done,
                 traced](Result<std::vector<ledger::LedgerEntry>> entries) mutable {
    if (!entries.is_ok()) {
      r.error = entries.status().code() == common::ErrorCode::kNotFound ? kOffsetOutOfRange : kKafkaStorageError;
      return done(r);
    }
    std::vector<ledger::Position> sent;
    Taken taken;
    r.records = to_batches(topic_name, *entries, max_bytes, traced ? &sent : nullptr, taken);
    if (taken.messages > 0) r.throttle_ns = limits.charge(taken.messages, taken.bytes, broker::limiter_now_ns());
    if (traced && !sent.empty()) traced(std::move(sent));
    done(r);
  };
  auto* managed = dynamic_cast<ledger::ManagedLedger*>(&log);
  // Below the compacted view's horizon: the view, whose removed offsets are
  // gaps (the next batch starts past them), as a compacted Kafka log reads.
  if (managed != nullptr && managed->compacted() && offset < managed->compacted()->horizon_index) {
    return managed->read_compacted_from_index(offset, n, std::move(answer));
  }
  auto read_from = [n, answer](ledger::Log& log, ledger::Position at) mutable {
    log.read_entries(ledger::Position{at.ledger, at.entry - 1}, n, std::move(answer));
  };
  if (auto at = chain.entry_of_index(offset)) return read_from(log, *at);
  if (managed == nullptr) {
    r.error = kOffsetOutOfRange;
    return done(r);
  }
  // The search reads entries: the ledger is kept alive across it.
  managed->seek_by_index(offset, [read_from, r, done, keep = managed->shared_from_this()](
                                     Result<ledger::Position> at) mutable {
    if (!at.is_ok()) {
      r.error = at.status().code() == common::ErrorCode::kNotFound ? kOffsetOutOfRange : kKafkaStorageError;
      return done(r);
    }
    read_from(*keep, *at);
  });
}

void attempt(KafkaConnection& c, const std::shared_ptr<FetchState>& state) {
  state->left = state->parts.size() + 1;
  state->wakes_at_attempt = c.wakes();
  auto one_done = [](KafkaConnection& conn, const std::shared_ptr<FetchState>& s) {
    if (--s->left == 0) settle(conn, s);
  };
  for (size_t k = 0; k < state->parts.size(); ++k) {
    PartitionFetch& p = state->parts[k];
    p.records = Slice();
    p.error = kNone;
    p.throttle_ns = 0;
    p.held = false;
    auto run = [reply = c.replier(), state, k, offset = p.offset, max_bytes = p.max_bytes, one_done,
                group = c.fetch_group(state->request.header), at_least_one = p.waited,
                key = c.waiter_key(), reader = c.client_info(state->request.header),
                &broker = c.service().broker()](
                   Result<broker::Topic*> t) {
      auto report = [reply, state, k, one_done](FetchedPartition r) {
        reply([state, k, one_done, r = std::move(r)](KafkaConnection& conn) mutable {
          PartitionFetch& part = state->parts[k];
          part.error = r.error;
          part.high_watermark = r.high_watermark;
          part.log_start = r.log_start;
          part.records = std::move(r.records);
          part.throttle_ns = r.throttle_ns;
          part.held = r.held;
          one_done(conn, state);
        });
      };
      if (!t.is_ok()) {
        FetchedPartition r;
        r.error = error_code(t.status());
        return report(r);
      }
      // At the end of the log: the next stored entry wakes this
      // connection's waiting fetches (a no-op when none waits by then).
      if (offset >= high_watermark((*t)->log())) {
        (*t)->when_entries_added(key, [reply]() { reply([](KafkaConnection& conn) { conn.wake_fetches(); }); });
      }
      // With tracing on, what went out is recorded as dispatched (the
      // topic is found again: the read may outlive it).
      std::function<void(std::vector<ledger::Position>)> traced;
      if ((*t)->tracing_on()) {
        traced = [&broker, name = (*t)->name(), reader](std::vector<ledger::Position> sent) {
          broker.with_existing_topic(name, false, [sent = std::move(sent), reader](Result<broker::Topic*> topic) {
            if (topic.is_ok()) (*topic)->trace_read(sent, reader, reader.client_version);
          });
        };
      }
      read_partition(*t, offset, max_bytes, (*t)->fetch_limits(group), at_least_one, report, std::move(traced));
    };
    c.with_partition(p.topic, p.partition, broker::TopicAction::kConsume, std::move(run));
  }
  one_done(c, state);
}

}  // namespace

void handle_fetch(KafkaConnection& c, const Request& request) {
  auto state = std::make_shared<FetchState>();
  state->request = request;
  const int64_t max_wait = std::max<int64_t>(0, request.body.i("MaxWaitMs"));
  state->deadline = Clock::now() + std::chrono::milliseconds(max_wait);
  state->min_bytes = static_cast<size_t>(std::max<int64_t>(0, request.body.i("MinBytes")));
  const auto request_max = static_cast<size_t>(std::max<int64_t>(1, request.body.i("MaxBytes")));
  state->max_bytes = request_max;
  for (const auto& t : request.body.array("Topics")) {
    for (const auto& p : t.array("Partitions")) {
      PartitionFetch part;
      part.topic = t.str("Name");
      part.partition = static_cast<int32_t>(p.i("PartitionIndex"));
      part.offset = p.i("FetchOffset");
      part.max_bytes = std::min(request_max, static_cast<size_t>(std::max<int64_t>(1, p.i("PartitionMaxBytes"))));
      state->parts.push_back(std::move(part));
    }
  }
  attempt(c, state);
}

}  // namespace magnetar::protocol::kafka
