// Deduplication decisions, the snapshot encoding, and a topic that keeps
// its producers' sequence ids across an unload and rebuilds them from the
// log.
#include "broker/dedup.h"

#include "utils/broker_fixture.h"

namespace magnetar::broker {
namespace {

TEST(DedupStateTest, SequenceIdsAtOrBelowThePersistedOneAreDuplicates) {
  DedupState s;
  EXPECT_EQ(s.check("p", 0), DedupVerdict::kNew);
  EXPECT_EQ(s.last_sequence_id("p"), -1);
  s.pushed("p", 0);
  EXPECT_EQ(s.check("p", 0), DedupVerdict::kMaybeDuplicate);  // still being stored
  s.persisted("p", 0, Position{1, 0});
  EXPECT_EQ(s.check("p", 0), DedupVerdict::kDuplicate);
  EXPECT_EQ(s.check("p", 1), DedupVerdict::kNew);
  EXPECT_EQ(s.check("q", 0), DedupVerdict::kNew);  // per producer name
  EXPECT_EQ(s.last_sequence_id("p"), 0);
}

TEST(DedupStateTest, ABatchCountsThroughItsHighestSequenceId) {
  EXPECT_EQ(highest_sequence_id(10, -1, 5), 14);
  EXPECT_EQ(highest_sequence_id(10, 20, 5), 20);
  EXPECT_EQ(highest_sequence_id(10, 0, 1), 10);
  DedupState s;
  s.pushed("p", highest_sequence_id(10, 14, 5));
  s.persisted("p", 14, Position{1, 0});
  EXPECT_EQ(s.check("p", 12), DedupVerdict::kDuplicate);
  EXPECT_EQ(s.check("p", 15), DedupVerdict::kNew);
}

TEST(DedupStateTest, AFailedStoreLetsTheSameIdsBeSentAgain) {
  DedupState s;
  s.persisted("p", 3, Position{1, 3});
  s.pushed("p", 4);
  s.forget_pushed("p");
  EXPECT_EQ(s.check("p", 4), DedupVerdict::kNew);
  EXPECT_EQ(s.check("p", 3), DedupVerdict::kDuplicate);
}

TEST(DedupSnapshotTest, RoundTripsAndRejectsGarbage) {
  DedupSnapshot snap{Position{7, 42}, {{"a", 5}, {"b", 99}}};
  auto back = decode_dedup_snapshot(encode_dedup_snapshot(snap));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(*back, snap);
  EXPECT_EQ(decode_dedup_snapshot("not a snapshot").status().code(), common::ErrorCode::kCorruption);
  DedupState s;
  s.restore(snap);
  EXPECT_EQ(s.check("b", 99), DedupVerdict::kDuplicate);
  EXPECT_EQ(s.last_position(), (Position{7, 42}));
}

class DedupTopicTest : public BrokerFixture {
 protected:
  static NamespacePolicies dedup(bool on) {
    NamespacePolicies p;
    p.deduplication = on;
    return p;
  }
  void enable(const std::string& topic) {
    on_topic<bool>(topic, [](Topic& t, auto done) {
      t.apply_policies(dedup(true));
      done(true);
    });
  }
  Result<Position> send(const std::string& topic, uint64_t producer, int64_t seq, const std::string& body) {
    return on_topic<Result<Position>>(topic, [=](Topic& t, auto done) {
      ledger::MessageHeader h;
      h.sequence_id = seq;
      t.publish(producer, h, Slice::copy_of(body), done);
    });
  }
  // One chunk of a message sent in chunks: every chunk has the message's sequence id.
  Result<Position> send_chunk(const std::string& topic, uint64_t producer, int64_t seq, bool last) {
    return on_topic<Result<Position>>(topic, [=](Topic& t, auto done) {
      ledger::MessageHeader h;
      h.sequence_id = seq;
      h.more_chunks = !last;
      t.publish(producer, h, Slice::copy_of("chunk"), done);
    });
  }
  Result<ProducerAdmission> admit(const std::string& topic, uint64_t id, const std::string& name) {
    return on_topic<Result<ProducerAdmission>>(topic, [=](Topic& t, auto done) {
      t.add_producer(ProducerOptions{id, name}, nullptr, done);
    });
  }
  void unload(const std::string& topic) {
    auto name = TopicName::parse(topic);
    std::promise<Status> p;
    broker_->unload_topic(*name, [&p](Status st) { p.set_value(st); });
    ASSERT_TRUE(p.get_future().get().is_ok());
  }
};

const std::string kTopic = "persistent://public/default/dedup";

TEST_F(DedupTopicTest, ADuplicateIsAnsweredWithoutBeingStored) {
  enable(kTopic);
  ASSERT_TRUE(admit(kTopic, 1, "p").is_ok());
  ASSERT_TRUE(send(kTopic, 1, 0, "a").is_ok());
  ASSERT_TRUE(send(kTopic, 1, 1, "b").is_ok());
  auto again = send(kTopic, 1, 1, "b");
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(*again, kDuplicatePosition);
  EXPECT_EQ(stats(kTopic).entries, 2u);
}

TEST_F(DedupTopicTest, SequenceIdsSurviveAnUnloadAndAreGivenToTheReturningProducer) {
  enable(kTopic);
  ASSERT_TRUE(admit(kTopic, 1, "p").is_ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(send(kTopic, 1, i, "m" + std::to_string(i)).is_ok());
  unload(kTopic);
  enable(kTopic);
  auto a = admit(kTopic, 2, "p");
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ(a->last_sequence_id, 4);
  EXPECT_EQ(*send(kTopic, 2, 3, "m3"), kDuplicatePosition);
  EXPECT_NE(*send(kTopic, 2, 5, "m5"), kDuplicatePosition);
  EXPECT_EQ(stats(kTopic).entries, 6u);
}

TEST_F(DedupTopicTest, AChunkedMessageIsJudgedByItsLastChunk) {
  enable(kTopic);
  ASSERT_TRUE(admit(kTopic, 1, "p").is_ok());
  ASSERT_TRUE(send(kTopic, 1, 0, "whole").is_ok());
  // Chunks before the last share its sequence id and are all stored.
  for (int i = 0; i < 3; ++i) EXPECT_NE(*send_chunk(kTopic, 1, 1, false), kDuplicatePosition);
  EXPECT_NE(*send_chunk(kTopic, 1, 1, true), kDuplicatePosition);
  EXPECT_EQ(*send_chunk(kTopic, 1, 1, true), kDuplicatePosition);  // the last chunk resent
  EXPECT_EQ(stats(kTopic).entries, 5u);
  // A message whose last chunk never came does not take its sequence id,
  // after a reload either.
  EXPECT_NE(*send_chunk(kTopic, 1, 2, false), kDuplicatePosition);
  unload(kTopic);
  enable(kTopic);
  auto a = admit(kTopic, 2, "p");
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ(a->last_sequence_id, 1);
  EXPECT_NE(*send_chunk(kTopic, 2, 2, false), kDuplicatePosition);
  EXPECT_NE(*send_chunk(kTopic, 2, 2, true), kDuplicatePosition);
  EXPECT_EQ(*send(kTopic, 2, 2, "again"), kDuplicatePosition);
}

TEST_F(DedupTopicTest, AReplicatedNamespaceJudgesOnlyReplicatorsWithoutTheDeduplicationPolicy) {
  NamespacePolicies replicated;
  replicated.replication_clusters = {"a", "b"};
  auto replicate = [&]() {
    on_topic<bool>(kTopic, [replicated](Topic& t, auto done) {
      t.apply_policies(replicated);
      done(t.deduplication_enabled());
    });
  };
  replicate();
  ASSERT_TRUE(admit(kTopic, 1, "pulsar.repl.a").is_ok());
  ASSERT_TRUE(admit(kTopic, 2, "p").is_ok());
  EXPECT_NE(*send(kTopic, 1, 7, "from a"), kDuplicatePosition);
  EXPECT_EQ(*send(kTopic, 1, 7, "from a, again"), kDuplicatePosition);
  EXPECT_EQ(*send(kTopic, 1, 3, "older"), kDuplicatePosition);
  EXPECT_NE(*send(kTopic, 2, 0, "local"), kDuplicatePosition);
  EXPECT_NE(*send(kTopic, 2, 0, "local, again"), kDuplicatePosition);  // not judged
  EXPECT_EQ(stats(kTopic).entries, 3u);
  // Rebuilt from the log after an unload: still the replicator only.
  unload(kTopic);
  replicate();
  ASSERT_TRUE(admit(kTopic, 3, "pulsar.repl.a").is_ok());
  ASSERT_TRUE(admit(kTopic, 4, "p").is_ok());
  EXPECT_EQ(*send(kTopic, 3, 7, "from a, once more"), kDuplicatePosition);
  EXPECT_NE(*send(kTopic, 3, 8, "next from a"), kDuplicatePosition);
  EXPECT_NE(*send(kTopic, 4, 0, "local, a third time"), kDuplicatePosition);
  EXPECT_EQ(stats(kTopic).entries, 5u);
}

TEST_F(DedupTopicTest, TurningDeduplicationOnRebuildsTheStateFromTheLog) {
  ASSERT_TRUE(admit(kTopic, 1, "p").is_ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(send(kTopic, 1, i, "x").is_ok());
  enable(kTopic);  // no snapshot yet: every entry is replayed
  EXPECT_EQ(*send(kTopic, 1, 2, "x"), kDuplicatePosition);
  auto a = admit(kTopic, 2, "q");
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ(a->last_sequence_id, -1);
  EXPECT_EQ(stats(kTopic).entries, 3u);
}

TEST_F(DedupTopicTest, MaintenanceSnapshotsWhatWasStoredSinceTheLastSnapshot) {
  enable(kTopic);
  ASSERT_TRUE(admit(kTopic, 1, "p").is_ok());
  Position last;
  for (int i = 0; i < 3; ++i) last = *send(kTopic, 1, i, "x");
  on_topic<bool>(kTopic, [](Topic& t, auto done) {
    t.maintain_producers();
    done(true);
  });
  std::optional<DedupSnapshot> snap;
  auto deadline = std::chrono::steady_clock::now() + kWait;
  while (!snap && std::chrono::steady_clock::now() < deadline) {
    std::promise<Result<metadata::Record>> got;
    store_->get("/dedup-snapshots/public/default/persistent/dedup",
                [&got](Result<metadata::Record> r) { got.set_value(std::move(r)); });
    auto r = got.get_future().get();
    if (r.is_ok()) {
      auto decoded = decode_dedup_snapshot(r->value);
      ASSERT_TRUE(decoded.is_ok());
      if (decoded->position == last) snap = *decoded;
    }
    if (!snap) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(snap.has_value());
  EXPECT_EQ(snap->sequences.at("p"), 2);
}

}  // namespace
}  // namespace magnetar::broker
