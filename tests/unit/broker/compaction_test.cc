// Topic compaction's pass (broker/compaction.h) over a real managed ledger,
// with a small text codec standing in for Pulsar's wire format: a payload
// is messages separated by '|', each "key=value"; "key=" is a tombstone,
// "=value" has no key, and "~key=" was compacted out.
#include "broker/compaction.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <thread>

#include "common/clock.h"
#include "utils/ledger_fixture.h"

namespace magnetar::broker {
namespace {

using common::Result;
using common::Slice;
using common::Status;
using ledger::LedgerEntry;
using ledger::Position;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t bar = s.find('|', start);
    out.push_back(s.substr(start, bar == std::string::npos ? std::string::npos : bar - start));
    if (bar == std::string::npos) return out;
    start = bar + 1;
  }
}

class TextCodec final : public CompactionCodec {
 public:
  Result<std::vector<CompactionMessage>> messages(const Slice& payload) const override {
    std::vector<CompactionMessage> out;
    for (const std::string& m : split(payload.to_string())) {
      size_t eq = m.find('=');
      if (eq == std::string::npos) return Status::corruption("no '=' in " + m);
      CompactionMessage c;
      c.compacted_out = !m.empty() && m[0] == '~';
      c.key = m.substr(c.compacted_out ? 1 : 0, eq - (c.compacted_out ? 1 : 0));
      c.has_key = !c.key.empty();
      c.tombstone = eq + 1 == m.size();
      out.push_back(c);
    }
    return out;
  }
  Result<Slice> keep_only(const Slice& payload, const std::vector<bool>& keep) const override {
    auto parts = split(payload.to_string());
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i > 0) out += '|';
      if (keep[i]) {
        out += parts[i];
      } else {
        const std::string& m = parts[i];
        out += (m[0] == '~' ? "" : "~") + m.substr(0, m.find('=') + 1);
      }
    }
    return Slice::copy_of(out);
  }
};

class CompactionTest : public ledger::ManagedLedgerFixture {
 protected:
  ledger::ManagedLedgerConfig small_ledgers() {
    ledger::ManagedLedgerConfig c;
    c.max_entries_per_ledger = 4;
    return c;
  }
  Position add_messages(ledger::ManagedLedger& ml, const std::string& payload) {
    auto p = add(ml, payload, static_cast<uint32_t>(split(payload).size()), common::wall_clock_ms());
    EXPECT_TRUE(p.is_ok());
    return *p;
  }
  Result<CompactionOutcome> compact(std::shared_ptr<ledger::ManagedLedger> ml, CompactionSettings s = {}) {
    s.max_read_bytes_per_second = 0;
    return on_reactor<Result<CompactionOutcome>>(
        [&](auto done) { run_compaction(ml, codec_, s, alive_, done); });
  }
  std::vector<LedgerEntry> read_view(ledger::ManagedLedger& ml) {
    return read_all(ml, Position{0, storage::kNoEntry}, true);
  }
  // key -> value of the live messages of the view, in order.
  std::vector<std::string> live(ledger::ManagedLedger& ml) {
    std::vector<std::string> out;
    for (const auto& e : read_view(ml)) {
      for (const std::string& m : split(e.payload.to_string())) {
        if (m[0] != '~') out.push_back(m);
      }
    }
    return out;
  }

  // Waits (bounded) for what storage does after an answer (a deletion).
  static bool eventually(const std::function<bool()>& done) {
    for (int i = 0; i < 500; ++i) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return done();
  }

  TextCodec codec_;
  std::shared_ptr<bool> topic_ = std::make_shared<bool>(true);
  std::weak_ptr<bool> alive_ = topic_;
};

TEST_F(CompactionTest, KeepsTheLatestMessageOfEachKeyInPlace) {
  auto ml = open("t", small_ledgers());
  add_messages(*ml, "a=1|b=1");
  const Position c1 = add_messages(*ml, "c=1");
  add_messages(*ml, "a=2|=nokey|d=1");
  add_messages(*ml, "b=");  // a tombstone
  const Position last = add_messages(*ml, "a=3|c=");
  add_messages(*ml, "d=2");
  auto outcome = compact(ml);
  ASSERT_TRUE(outcome.is_ok()) << outcome.status().to_string();
  EXPECT_EQ(outcome->horizon, ml->last_confirmed());
  EXPECT_EQ(outcome->keys, 2u);  // a and d
  ASSERT_TRUE(ml->compacted());
  EXPECT_EQ(ml->compacted()->horizon_index, 10);
  EXPECT_EQ(live(*ml), (std::vector<std::string>{"a=3", "d=2"}));
  // Each entry of the view is where it was in the log, its message count
  // and first index unchanged (Kafka offsets keep their values).
  auto view = read_view(*ml);
  ASSERT_EQ(view.size(), 2u);
  EXPECT_EQ(view[0].position, last);
  EXPECT_EQ(view[0].header.first_index, 7);
  EXPECT_EQ(view[0].header.messages, 2u);
  EXPECT_EQ(view[0].payload.to_string(), "a=3|~c=");
  // Reading from the middle of the view starts after the position given.
  auto after = on_reactor<Result<std::vector<LedgerEntry>>>([&](auto done) { ml->read_compacted(c1, 10, done); });
  ASSERT_TRUE(after.is_ok());
  ASSERT_FALSE(after->empty());
  EXPECT_EQ(after->front().position, last);
}

TEST_F(CompactionTest, TombstonesStayForTheDeleteRetention) {
  auto ml = open("t");
  add_messages(*ml, "a=1|b=1");
  add_messages(*ml, "b=");
  CompactionSettings s;
  s.delete_retention = std::chrono::hours(1);
  ASSERT_TRUE(compact(ml, s).is_ok());
  EXPECT_EQ(live(*ml), (std::vector<std::string>{"a=1", "b="}));
}

TEST_F(CompactionTest, ACompactDeleteViewAgesOutByItsRetentionTime) {
  auto ml = open("t", small_ledgers());
  const int64_t now = common::wall_clock_ms();
  ASSERT_TRUE(add(*ml, "a=1|b=1", 2, now - 2 * 3600 * 1000).is_ok());  // past an hour's retention
  ASSERT_TRUE(add(*ml, "b=", 1, now - 2 * 3600 * 1000).is_ok());       // a tombstone as old
  ASSERT_TRUE(add(*ml, "c=1", 1, now - 30 * 60 * 1000).is_ok());
  ASSERT_TRUE(add(*ml, "d=1", 1, now).is_ok());
  CompactionSettings s;
  s.delete_retention = std::chrono::hours(24);
  s.drop_covered = true;  // as a compact,delete topic's pass
  s.max_age = std::chrono::hours(1);
  auto first = compact(ml, s);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  EXPECT_EQ(live(*ml), (std::vector<std::string>{"c=1", "d=1"}));
  EXPECT_EQ(first->keys, 2u);
  EXPECT_EQ(ml->compacted_first_index(), 3);  // Kafka's log start moves past what aged out
  const int64_t horizon_index = ml->compacted()->horizon_index;
  // Nothing new, but the view ages: a pass with a shorter retention rewrites it.
  s.max_age = std::chrono::minutes(10);
  auto second = compact(ml, s);
  ASSERT_TRUE(second.is_ok()) << second.status().to_string();
  EXPECT_FALSE(second->nothing_to_do);
  EXPECT_EQ(live(*ml), (std::vector<std::string>{"d=1"}));
  EXPECT_EQ(ml->compacted()->horizon_index, horizon_index);
  EXPECT_EQ(ml->compacted_first_index(), 4);
  // Without an age limit, nothing new is nothing to do.
  auto third = compact(ml, CompactionSettings{});
  ASSERT_TRUE(third.is_ok());
  EXPECT_TRUE(third->nothing_to_do);
  EXPECT_EQ(live(*ml), (std::vector<std::string>{"d=1"}));
}

TEST_F(CompactionTest, ASecondPassFoldsTheViewAndWhatCameAfterIt) {
  auto ml = open("t", small_ledgers());
  for (int v = 0; v < 5; ++v) add_messages(*ml, "a=" + std::to_string(v) + "|b=" + std::to_string(v));
  ASSERT_TRUE(compact(ml).is_ok());
  const storage::LedgerId first_view = ml->compacted()->ledger;
  add_messages(*ml, "b=9");
  // After the horizon, the log's own entries follow the view.
  EXPECT_EQ(live(*ml), (std::vector<std::string>{"a=4", "b=4", "b=9"}));
  auto second = compact(ml);
  ASSERT_TRUE(second.is_ok());
  EXPECT_FALSE(second->nothing_to_do);
  EXPECT_NE(ml->compacted()->ledger, first_view);
  EXPECT_EQ(live(*ml), (std::vector<std::string>{"a=4", "b=9"}));
  // The previous view's ledger is deleted after the switch.
  EXPECT_TRUE(eventually([&] { return !storage_->ledger_info(first_view).is_ok(); }));
  // Nothing new: nothing to do.
  auto third = compact(ml);
  ASSERT_TRUE(third.is_ok());
  EXPECT_TRUE(third->nothing_to_do);
}

TEST_F(CompactionTest, AViewThatReplacesTheHistoryDropsItsLedgers) {
  auto ml = open("t", small_ledgers());
  for (int v = 0; v < 12; ++v) add_messages(*ml, "k" + std::to_string(v % 3) + "=" + std::to_string(v));
  const size_t before = ml->chain().ledgers().size();
  CompactionSettings s;
  s.drop_covered = true;
  auto outcome = compact(ml, s);
  ASSERT_TRUE(outcome.is_ok());
  EXPECT_LT(ml->chain().ledgers().size(), before);
  EXPECT_LT(outcome->bytes_after, outcome->bytes_before);
  EXPECT_EQ(live(*ml), (std::vector<std::string>{"k0=9", "k1=10", "k2=11"}));
  EXPECT_LE(ml->compacted_first_index(), 9);
  // The view is in the ledger list: it is there after the log opens again.
  ledgers_.clear();
  EXPECT_TRUE(on_reactor<Status>([&](auto done) { ml->close(done); }).is_ok());
  auto again = open("t", small_ledgers());
  ASSERT_TRUE(again->compacted());
  EXPECT_EQ(live(*again), (std::vector<std::string>{"k0=9", "k1=10", "k2=11"}));
}

TEST_F(CompactionTest, ALedgerLeftByACutPassIsDeletedWhenTheLogOpens) {
  auto ml = open("t");
  add_messages(*ml, "a=1|a=2");
  ASSERT_TRUE(compact(ml).is_ok());
  const auto view = *ml->compacted();
  add_messages(*ml, "a=3");
  ASSERT_TRUE(on_reactor<Status>([&](auto done) { ml->begin_compacted_ledger(done); }).is_ok());
  // Cut here: the process goes away with the ledger half written.
  ledgers_.clear();
  ml.reset();
  auto again = open("t");
  ASSERT_TRUE(again->compacted());
  EXPECT_EQ(*again->compacted(), view);
  EXPECT_FALSE(again->compacting());
  EXPECT_EQ(live(*again), (std::vector<std::string>{"a=2", "a=3"}));
  // Storage keeps only what the list names: the half-written ledger went.
  EXPECT_TRUE(eventually([&] {
    for (storage::LedgerId id : storage_->list_ledgers()) {
      if (id != view.ledger && again->chain().find(id) == nullptr) return false;
    }
    return true;
  }));
  // And a pass runs again from there.
  ASSERT_TRUE(compact(again).is_ok());
  EXPECT_EQ(live(*again), (std::vector<std::string>{"a=3"}));
}

TEST_F(CompactionTest, APassWhoseTopicWentAwayStopsAndLeavesTheViewInPlace) {
  auto ml = open("t");
  add_messages(*ml, "a=1|a=2");
  topic_.reset();
  auto outcome = compact(ml);
  EXPECT_EQ(outcome.status().code(), common::ErrorCode::kUnavailable);
  EXPECT_FALSE(ml->compacted());
  EXPECT_FALSE(ml->compacting());
}

TEST(CompactionBoardTest, ReportsThePassesOfEachTopic) {
  CompactionBoard board;
  EXPECT_EQ(board.report("t").state, CompactionState::kNotRun);
  EXPECT_TRUE(board.try_start("t"));
  EXPECT_FALSE(board.try_start("t"));
  EXPECT_EQ(compaction_state_name(board.report("t").state), "RUNNING");
  board.finish("t", Status::io_error("disk"));
  EXPECT_EQ(board.report("t").state, CompactionState::kError);
  EXPECT_EQ(board.report("t").last_error, "disk");
  EXPECT_TRUE(board.try_start("t"));
  board.finish("t", CompactionOutcome{});
  EXPECT_EQ(compaction_state_name(board.report("t").state), "SUCCESS");
}

}  // namespace
}  // namespace magnetar::broker
