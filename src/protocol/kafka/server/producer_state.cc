#include "protocol/kafka/server/producer_state.h"

#include <algorithm>
#include <climits>

#include <fmt/format.h>

namespace magnetar::protocol::kafka {

namespace {

int32_t after(int32_t sequence) { return sequence == INT32_MAX ? 0 : sequence + 1; }

}  // namespace

std::string ProducerStates::key(const std::string& partition, int64_t producer_id) {
  return fmt::format("{}#{}", partition, producer_id);
}

SequenceCheck ProducerStates::check_and_record(const std::string& partition, const SequencedBatch& batch,
                                               int64_t base_offset, int64_t now_ms) {
  SequenceCheck out;
  out.base_offset = base_offset;
  if (batch.producer_id < 0) return out;  // not an idempotent producer
  if (batch.first_sequence < 0 || batch.epoch < 0) {
    out.error = kInvalidRecord;
    out.why = "an idempotent batch needs a sequence number and an epoch";
    return out;
  }
  expire_idle(now_ms);
  auto [it, fresh] = states_.try_emplace(key(partition, batch.producer_id));
  State& s = it->second;
  if (!fresh && batch.epoch < s.epoch) {
    out.error = kInvalidProducerEpoch;
    out.why = fmt::format("producer {} epoch {} is older than its current epoch {}", batch.producer_id, batch.epoch,
                          s.epoch);
    return out;
  }
  if (!fresh && batch.epoch == s.epoch) {
    for (const Written& w : s.recent) {
      if (w.first == batch.first_sequence && w.last == batch.last_sequence) {
        s.last_used_ms = now_ms;
        out.duplicate = true;
        out.base_offset = w.base_offset;
        return out;
      }
    }
    if (batch.first_sequence != after(s.last_sequence)) {
      const int64_t behind = int64_t{s.last_sequence} - batch.first_sequence;
      const bool old = behind >= 0 && behind < (int64_t{1} << 30);
      out.error = old ? kDuplicateSequenceNumber : kOutOfOrderSequenceNumber;
      out.why = fmt::format("producer {} sent sequence {} on {}; expected {}", batch.producer_id,
                            batch.first_sequence, partition, after(s.last_sequence));
      return out;
    }
  }
  if (fresh || batch.epoch > s.epoch) {
    s.recent.clear();
    s.epoch = batch.epoch;
  }
  s.last_sequence = batch.last_sequence;
  s.last_used_ms = now_ms;
  s.recent.push_back(Written{batch.first_sequence, batch.last_sequence, base_offset});
  if (s.recent.size() > kRememberedBatches) s.recent.pop_front();
  return out;
}

void ProducerStates::forget(const std::string& partition, int64_t producer_id) {
  states_.erase(key(partition, producer_id));
}

int64_t ProducerIds::next(int64_t now_ms) {
  int64_t last = last_.load(std::memory_order_relaxed);
  for (;;) {
    int64_t id = std::max(now_ms << 12, last + 1);
    if (last_.compare_exchange_weak(last, id, std::memory_order_relaxed)) return id;
  }
}

void ProducerStates::expire_idle(int64_t now_ms) {
  if (now_ms < next_expiry_ms_) return;
  next_expiry_ms_ = now_ms + 60 * 1000;
  for (auto it = states_.begin(); it != states_.end();) {
    it = now_ms - it->second.last_used_ms > kExpiryMs ? states_.erase(it) : std::next(it);
  }
}

}  // namespace magnetar::protocol::kafka
