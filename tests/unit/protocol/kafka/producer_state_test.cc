#include "protocol/kafka/server/producer_state.h"

#include <climits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace magnetar::protocol::kafka {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;

SequencedBatch batch(int64_t pid, int16_t epoch, int32_t first, int32_t last) {
  return SequencedBatch{pid, epoch, first, last};
}

// Checks `b` and, when it is to be appended, reports it written at `offset`.
SequenceCheck record(ProducerStates& s, const std::string& partition, const SequencedBatch& b, int64_t offset,
                     int64_t now) {
  SequenceCheck c = s.check_and_record(partition, b, now);
  if (c.error == kNone && !c.duplicate) s.written(partition, b, offset);
  return c;
}

TEST(ProducerStatesTest, InOrderBatchesAppendAndRetriesAreDuplicatesWithTheirOffset) {
  ProducerStates s;
  EXPECT_EQ(record(s, "t", batch(7, 0, 0, 4), 100, kNow).error, kNone);
  auto second = record(s, "t", batch(7, 0, 5, 9), 105, kNow);
  EXPECT_EQ(second.error, kNone);
  EXPECT_FALSE(second.duplicate);
  auto retry = record(s, "t", batch(7, 0, 0, 4), 110, kNow);
  EXPECT_EQ(retry.error, kNone);
  EXPECT_TRUE(retry.duplicate);
  EXPECT_EQ(retry.base_offset, 100);
  // The retry changed nothing: the next batch still follows 9.
  EXPECT_EQ(record(s, "t", batch(7, 0, 10, 10), 110, kNow).error, kNone);
}

TEST(ProducerStatesTest, ProducersOfAPartitionAreListedById) {
  ProducerStates s;
  EXPECT_EQ(record(s, "t-partition-1", batch(9, 2, 0, 4), 100, kNow).error, kNone);
  EXPECT_EQ(record(s, "t-partition-1", batch(3, 0, 0, 0), 105, kNow + 1).error, kNone);
  EXPECT_EQ(record(s, "t-partition-10", batch(5, 0, 0, 0), 0, kNow).error, kNone);
  auto listed = s.producers_of("t-partition-1");
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].producer_id, 3);
  EXPECT_EQ(listed[0].last_sequence, 0);
  EXPECT_EQ(listed[0].last_used_ms, kNow + 1);
  EXPECT_EQ(listed[1].producer_id, 9);
  EXPECT_EQ(listed[1].epoch, 2);
  EXPECT_EQ(listed[1].last_sequence, 4);
  EXPECT_TRUE(s.producers_of("t").empty());
}

TEST(ProducerStatesTest, GapsAreOutOfOrderAndOldSequencesDuplicates) {
  ProducerStates s;
  record(s, "t", batch(7, 0, 0, 9), 0, kNow);
  EXPECT_EQ(record(s, "t", batch(7, 0, 12, 12), 10, kNow).error, kOutOfOrderSequenceNumber);
  EXPECT_EQ(record(s, "t", batch(7, 0, 3, 5), 10, kNow).error, kDuplicateSequenceNumber);
  EXPECT_EQ(record(s, "t", batch(7, 0, 10, 10), 10, kNow).error, kNone);
}

TEST(ProducerStatesTest, ABatchAheadIsTakenOnceThePartitionWasLoadedAgain) {
  // Loaded here (load 1), moved to another member that took sequences
  // 5..19, and back (load 2).
  ProducerStates s;
  ASSERT_EQ(s.check_and_record("t", batch(7, 0, 0, 4), kNow, 1).error, kNone);
  s.written("t", batch(7, 0, 0, 4), 100);
  EXPECT_EQ(s.check_and_record("t", batch(7, 0, 20, 24), kNow, 1).error, kOutOfOrderSequenceNumber);
  auto retry = s.check_and_record("t", batch(7, 0, 0, 4), kNow, 2);
  EXPECT_TRUE(retry.duplicate);  // what was kept here still answers its retries
  EXPECT_EQ(retry.base_offset, 100);
  EXPECT_EQ(s.check_and_record("t", batch(7, 0, 2, 3), kNow, 2).error, kDuplicateSequenceNumber);
  auto ahead = s.check_and_record("t", batch(7, 0, 20, 24), kNow, 2);
  EXPECT_EQ(ahead.error, kNone);
  EXPECT_FALSE(ahead.duplicate);
  s.written("t", batch(7, 0, 20, 24), 120);
  // Under that load, sequences are checked as before.
  EXPECT_EQ(s.check_and_record("t", batch(7, 0, 30, 30), kNow, 2).error, kOutOfOrderSequenceNumber);
  EXPECT_EQ(s.check_and_record("t", batch(7, 0, 25, 25), kNow, 2).error, kNone);
}

TEST(ProducerStatesTest, OnlyTheLastFiveBatchesAreRemembered) {
  ProducerStates s;
  for (int32_t k = 0; k < 7; ++k) record(s, "t", batch(1, 0, k, k), k, kNow);
  EXPECT_TRUE(record(s, "t", batch(1, 0, 2, 2), 9, kNow).duplicate);
  EXPECT_EQ(record(s, "t", batch(1, 0, 1, 1), 9, kNow).error, kDuplicateSequenceNumber);
}

TEST(ProducerStatesTest, EpochsFenceOlderOnesAndANewEpochStartsOver) {
  ProducerStates s;
  record(s, "t", batch(1, 0, 0, 3), 0, kNow);
  EXPECT_EQ(record(s, "t", batch(1, 1, 0, 0), 4, kNow).error, kNone);
  EXPECT_EQ(record(s, "t", batch(1, 0, 4, 4), 5, kNow).error, kInvalidProducerEpoch);
}

TEST(ProducerStatesTest, PartitionsAndProducersAreIndependent) {
  ProducerStates s;
  record(s, "t-0", batch(1, 0, 0, 9), 0, kNow);
  EXPECT_EQ(record(s, "t-1", batch(1, 0, 0, 0), 0, kNow).error, kNone);
  EXPECT_EQ(record(s, "t-0", batch(2, 0, 0, 0), 10, kNow).error, kNone);
  EXPECT_EQ(s.size(), 3u);
}

TEST(ProducerStatesTest, SequencesWrapAtInt32Max) {
  ProducerStates s;
  record(s, "t", batch(1, 0, INT32_MAX - 1, INT32_MAX), 0, kNow);
  EXPECT_EQ(record(s, "t", batch(1, 0, 0, 3), 2, kNow).error, kNone);
}

TEST(ProducerStatesTest, IdleProducersExpireAndAreThenTakenAtAnySequence) {
  ProducerStates s;
  record(s, "t", batch(1, 0, 0, 9), 0, kNow);
  const int64_t later = kNow + ProducerStates::kExpiryMs + 120'000;
  record(s, "u", batch(2, 0, 0, 0), 0, later);
  EXPECT_EQ(s.size(), 1u);  // producer 1 on t idled out
  EXPECT_EQ(record(s, "t", batch(1, 0, 50, 59), 10, later).error, kNone);
}

TEST(ProducerStatesTest, PastTheBoundTheLeastRecentlyUsedProducersAreDropped) {
  ProducerStates s(20);
  // Producers 1..20, producer k last used at kNow + k; producer 3 again late.
  for (int64_t k = 1; k <= 20; ++k) record(s, "t", batch(k, 0, 0, 0), k, kNow + k);
  EXPECT_TRUE(record(s, "t", batch(3, 0, 0, 0), 3, kNow + 100).duplicate);
  EXPECT_EQ(s.size(), 20u);
  // The 21st drops the least recently used tenth (2 of 20): producers 1 and 2.
  EXPECT_EQ(record(s, "t", batch(21, 0, 7, 7), 21, kNow + 101).error, kNone);
  EXPECT_EQ(s.size(), 19u);
  EXPECT_EQ(s.producers_of("t").front().producer_id, 3);
  // Dropped: its retry is taken as a new batch (written again, as after a
  // restart); kept: still a duplicate, and the newcomer is kept.
  EXPECT_FALSE(record(s, "t", batch(1, 0, 0, 0), 22, kNow + 102).duplicate);
  EXPECT_TRUE(record(s, "t", batch(3, 0, 0, 0), 3, kNow + 103).duplicate);
  EXPECT_TRUE(record(s, "t", batch(21, 0, 7, 7), 21, kNow + 104).duplicate);
  EXPECT_LE(s.size(), 20u);
}

TEST(ProducerStatesTest, AFailedBatchIsTakenBackAndNoLaterOneIsTakenBeforeItsRetry) {
  // Batch 1 fails to append. Were the producer's state dropped, batch 2
  // would be taken at any sequence and answered with a success, which a
  // Kafka client takes as the acknowledgement of batch 1 too: lost.
  ProducerStates s;
  ASSERT_EQ(record(s, "t", batch(7, 0, 0, 0), 100, kNow).error, kNone);
  ASSERT_EQ(s.check_and_record("t", batch(7, 0, 1, 1), kNow).error, kNone);
  s.failed("t", batch(7, 0, 1, 1));
  EXPECT_EQ(s.check_and_record("t", batch(7, 0, 2, 2), kNow).error, kOutOfOrderSequenceNumber);
  auto retry = s.check_and_record("t", batch(7, 0, 1, 1), kNow);
  EXPECT_EQ(retry.error, kNone);
  EXPECT_FALSE(retry.duplicate);  // written now, not answered from memory
  EXPECT_TRUE(s.written("t", batch(7, 0, 1, 1), 101));
  EXPECT_EQ(record(s, "t", batch(7, 0, 2, 2), 102, kNow).error, kNone);
  // What was stored before the failure still answers its retries.
  EXPECT_EQ(s.check_and_record("t", batch(7, 0, 0, 0), kNow).base_offset, 100);
  EXPECT_EQ(s.producers_of("t")[0].last_sequence, 2);
}

TEST(ProducerStatesTest, BatchesTakenAfterAFailedOneAreTakenBackWithIt) {
  ProducerStates s;
  ASSERT_EQ(s.check_and_record("t", batch(7, 0, 0, 4), kNow).error, kNone);
  ASSERT_EQ(s.check_and_record("t", batch(7, 0, 5, 9), kNow).error, kNone);
  ASSERT_EQ(s.check_and_record("t", batch(7, 0, 10, 14), kNow).error, kNone);
  std::vector<ErrorCode> answers;
  ASSERT_TRUE(s.when_written("t", batch(7, 0, 10, 14), [&](ErrorCode e, int64_t) { answers.push_back(e); }));
  s.failed("t", batch(7, 0, 5, 9));
  EXPECT_EQ(answers, std::vector<ErrorCode>{kKafkaStorageError});  // the retry waiting on 10..14
  s.failed("t", batch(7, 0, 10, 14));                              // follows its log: nothing more to take back
  EXPECT_TRUE(s.written("t", batch(7, 0, 0, 4), 100));
  // Stored anyway behind the failed batch: not to be answered as a success.
  EXPECT_FALSE(s.written("t", batch(7, 0, 10, 14), 110));
  EXPECT_EQ(s.check_and_record("t", batch(7, 0, 10, 14), kNow).error, kOutOfOrderSequenceNumber);
  EXPECT_EQ(s.check_and_record("t", batch(7, 0, 5, 9), kNow).error, kNone);
}

TEST(ProducerStatesTest, AFailedFirstBatchLeavesTheProducerExpectingItsRetry) {
  // The first batch of a producer here is taken at any sequence; when it
  // fails, only its retry is, not the batch after it.
  ProducerStates s;
  ASSERT_EQ(s.check_and_record("t", batch(7, 0, 0, 0), kNow).error, kNone);
  s.failed("t", batch(7, 0, 0, 0));
  EXPECT_EQ(s.check_and_record("t", batch(7, 0, 1, 1), kNow).error, kOutOfOrderSequenceNumber);
  EXPECT_EQ(s.check_and_record("t", batch(7, 0, 0, 0), kNow).error, kNone);
  // A new epoch (the client gave the failed batch up) starts over.
  ASSERT_EQ(s.check_and_record("t", batch(8, 0, 40, 40), kNow).error, kNone);
  s.failed("t", batch(8, 0, 40, 40));
  EXPECT_EQ(s.check_and_record("t", batch(8, 1, 0, 0), kNow).error, kNone);
}

TEST(ProducerStatesTest, ARetryOfABatchBeingWrittenWaitsForItsOffset) {
  ProducerStates s;
  ASSERT_EQ(s.check_and_record("t", batch(7, 0, 0, 4), kNow).error, kNone);
  auto retry = s.check_and_record("t", batch(7, 0, 0, 4), kNow);
  EXPECT_TRUE(retry.duplicate);
  EXPECT_EQ(retry.base_offset, -1);
  std::vector<std::pair<ErrorCode, int64_t>> answers;
  ASSERT_TRUE(s.when_written("t", batch(7, 0, 0, 4), [&](ErrorCode e, int64_t o) { answers.emplace_back(e, o); }));
  EXPECT_TRUE(answers.empty());
  s.written("t", batch(7, 0, 0, 4), 42);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0], std::make_pair(kNone, int64_t{42}));
  EXPECT_EQ(s.check_and_record("t", batch(7, 0, 0, 4), kNow).base_offset, 42);
  // Nothing is being written for a batch already written.
  EXPECT_FALSE(s.when_written("t", batch(7, 0, 0, 4), [](ErrorCode, int64_t) {}));

  // When the append fails, the retry waiting for it hears a retriable error.
  ASSERT_EQ(s.check_and_record("t", batch(7, 0, 5, 9), kNow).error, kNone);
  ASSERT_TRUE(s.when_written("t", batch(7, 0, 5, 9), [&](ErrorCode e, int64_t o) { answers.emplace_back(e, o); }));
  s.failed("t", batch(7, 0, 5, 9));
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[1], std::make_pair(kKafkaStorageError, int64_t{-1}));
}

TEST(ProducerStatesTest, NonIdempotentBatchesPassAndIdsNeverRepeat) {
  ProducerStates s;
  EXPECT_EQ(record(s, "t", batch(-1, -1, -1, -1), 0, kNow).error, kNone);
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(record(s, "t", batch(4, -1, -1, -1), 0, kNow).error, kInvalidRecord);
  ProducerIds ids;
  int64_t a = ids.next(kNow);
  int64_t b = ids.next(kNow);
  int64_t c = ids.next(kNow - 1000);  // the clock stepped back
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
}

TEST(ProducerIdsTest, MembersNeverHandOutTheSameIdAndIdsOnlyGrow) {
  constexpr int64_t t0 = 1'796'000'000'000;  // December 2026
  ProducerIds one(1);
  ProducerIds two(2);
  std::set<int64_t> seen;
  int64_t last_one = 0;
  int64_t last_two = 0;
  // Both at the same milliseconds, past one millisecond's counter, and with
  // the clock stepping back.
  for (int i = 0; i < 10000; ++i) {
    const int64_t now = t0 + i / 5000 - (i % 997 == 0 ? 50 : 0);
    const int64_t a = one.next(now);
    const int64_t b = two.next(now);
    EXPECT_GT(a, last_one);
    EXPECT_GT(b, last_two);
    last_one = a;
    last_two = b;
    EXPECT_TRUE(seen.insert(a).second) << a;
    EXPECT_TRUE(seen.insert(b).second) << b;
  }
  // Larger than any id the earlier scheme (the clock shifted left 12 bits)
  // gave, even one from 70 years on.
  EXPECT_GT(ProducerIds(0).next(t0), (t0 + 1000LL * 86400 * 365 * 70) << 12);
}

}  // namespace
}  // namespace magnetar::protocol::kafka
