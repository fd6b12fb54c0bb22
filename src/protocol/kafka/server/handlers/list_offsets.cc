// ListOffsets: earliest (-2) is the first message index the log still
// holds, latest (-1) one past the last stored one (the high watermark); a
// timestamp gives the first message published at or after it (publish
// time, the broker's clock) or -1 when none was.
#include "ledger/managed_ledger.h"
#include "protocol/kafka/errors.h"
#include "protocol/kafka/server/kafka_connection.h"
#include "protocol/kafka/server/offsets.h"

namespace magnetar::protocol::kafka {

using common::Result;

namespace {

constexpr int64_t kLatest = -1;
constexpr int64_t kEarliest = -2;

struct OffsetAnswer {
  std::string topic;
  int32_t partition = 0;
  int64_t timestamp = 0;  // asked
  ErrorCode error = kNone;
  int64_t offset = -1;
};

struct ListState {
  Request request;
  std::vector<OffsetAnswer> answers;
  size_t left = 0;
};

void answer(KafkaConnection& c, ListState& state) {
  Struct resp = state.request.response();
  resp.set("ThrottleTimeMs", int64_t{0});
  Struct* topic = nullptr;
  for (const OffsetAnswer& a : state.answers) {
    if (topic == nullptr || topic->str("Name") != a.topic) {
      topic = &resp.add("Topics");
      topic->set("Name", a.topic);
    }
    auto& p = topic->add("Partitions");
    p.set("PartitionIndex", int64_t{a.partition});
    p.set("ErrorCode", int64_t{a.error});
    if (a.error == kNone) p.set("OldStyleOffsets", std::vector<int64_t>{a.offset});
    p.set("Timestamp", int64_t{-1});
    p.set("Offset", a.offset);
    p.set("LeaderEpoch", int64_t{0});
  }
  c.respond(state.request, resp);
}

// On the topic's home reactor.
void find_offset(broker::Topic* topic, int64_t timestamp, std::function<void(ErrorCode, int64_t)> done) {
  ledger::Log& log = topic->log();
  if (timestamp == kLatest) return done(kNone, high_watermark(log));
  if (timestamp == kEarliest) return done(kNone, log_start_offset(log));
  auto* managed = dynamic_cast<ledger::ManagedLedger*>(&log);
  if (managed == nullptr) return done(kNone, -1);
  managed->seek_by_time(timestamp, [keep = managed->shared_from_this(), done](Result<ledger::Position> at) {
    if (!at.is_ok()) return done(at.status().code() == common::ErrorCode::kNotFound ? kNone : kKafkaStorageError, -1);
    keep->read_entries(ledger::Position{at->ledger, at->entry - 1}, 1,
                     [done](Result<std::vector<ledger::LedgerEntry>> entries) {
                       if (!entries.is_ok()) return done(kKafkaStorageError, -1);
                       if (entries->empty()) return done(kNone, -1);
                       done(kNone, entries->front().header.first_index);
                     });
  });
}

}  // namespace

void handle_list_offsets(KafkaConnection& c, const Request& request) {
  auto state = std::make_shared<ListState>();
  state->request = request;
  for (const auto& t : request.body.array("Topics")) {
    for (const auto& p : t.array("Partitions")) {
      OffsetAnswer a;
      a.topic = t.str("Name");
      a.partition = static_cast<int32_t>(p.i("PartitionIndex"));
      a.timestamp = p.i("Timestamp");
      state->answers.push_back(std::move(a));
    }
  }
  state->left = state->answers.size() + 1;
  auto one_done = [](KafkaConnection& conn, const std::shared_ptr<ListState>& s) {
    if (--s->left == 0) answer(conn, *s);
  };
  for (size_t k = 0; k < state->answers.size(); ++k) {
    OffsetAnswer& a = state->answers[k];
    auto run = [reply = c.replier(), state, k, timestamp = a.timestamp, one_done](Result<broker::Topic*> t) {
      auto report = [reply, state, k, one_done](ErrorCode e, int64_t offset) {
        reply([state, k, one_done, e, offset](KafkaConnection& conn) {
          state->answers[k].error = e;
          state->answers[k].offset = offset;
          one_done(conn, state);
        });
      };
      if (!t.is_ok()) return report(error_code(t.status()), -1);
      find_offset(*t, timestamp, report);
    };
    c.with_partition(a.topic, a.partition, broker::TopicAction::kConsume, std::move(run));
  }
  one_done(c, state);
}

}  // namespace magnetar::protocol::kafka
