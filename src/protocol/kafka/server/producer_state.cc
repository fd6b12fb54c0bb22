#include "protocol/kafka/server/producer_state.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <iterator>

#include <fmt/format.h>

#include "common/logging.h"
#include "common/metrics.h"

namespace magnetar::protocol::kafka {

namespace {

int32_t after(int32_t sequence) { return sequence == INT32_MAX ? 0 : sequence + 1; }
int32_t before(int32_t sequence) { return sequence == 0 ? INT32_MAX : sequence - 1; }

// Whether `sequence` comes at or before `last` (less than 2^30 behind it).
bool at_or_before(int32_t sequence, int32_t last) {
  const int64_t behind = int64_t{last} - sequence;
  return behind >= 0 && behind < (int64_t{1} << 30);
}

}  // namespace

std::string ProducerStates::key(const std::string& partition, int64_t producer_id) {
  return fmt::format("{}#{}", partition, producer_id);
}

std::vector<ProducerSnapshot> ProducerStates::producers_of(const std::string& partition) const {
  std::vector<ProducerSnapshot> out;
  const std::string prefix = partition + "#";
  for (const auto& [k, state] : states_) {
    if (k.compare(0, prefix.size(), prefix) != 0) continue;
    const int64_t id = std::strtoll(k.c_str() + prefix.size(), nullptr, 10);
    out.push_back({id, state.epoch, state.last_sequence, state.last_used_ms});
  }
  std::sort(out.begin(), out.end(),
            [](const ProducerSnapshot& a, const ProducerSnapshot& b) { return a.producer_id < b.producer_id; });
  return out;
}

SequenceCheck ProducerStates::check_and_record(const std::string& partition, const SequencedBatch& batch,
                                               int64_t now_ms, uint64_t load) {
  SequenceCheck out;
  if (batch.producer_id < 0) return out;  // not an idempotent producer
  if (batch.first_sequence < 0 || batch.epoch < 0) {
    out.error = kInvalidRecord;
    out.why = "an idempotent batch needs a sequence number and an epoch";
    return out;
  }
  expire_idle(now_ms);
  auto [it, fresh] = states_.try_emplace(key(partition, batch.producer_id));
  if (fresh && states_.size() > max_states_) evict_oldest(it->first, now_ms);
  State& s = it->second;
  // Loaded here again since: the partition may have been on another member
  // meanwhile, so a batch ahead of what is kept here is taken.
  const bool reloaded = !fresh && s.load != load;
  bool ahead = false;
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
      const bool old = at_or_before(batch.first_sequence, s.last_sequence);
      ahead = !old && reloaded;
      if (!ahead) {
        out.error = old ? kDuplicateSequenceNumber : kOutOfOrderSequenceNumber;
        out.why = fmt::format("producer {} sent sequence {} on {}; expected {}", batch.producer_id,
                              batch.first_sequence, partition, after(s.last_sequence));
        return out;
      }
    }
  }
  s.load = load;
  if (fresh || batch.epoch > s.epoch || ahead) {
    fail_waiting(s.recent);
    s.recent.clear();
    s.epoch = batch.epoch;
  }
  s.last_sequence = batch.last_sequence;
  s.last_used_ms = now_ms;
  if (s.recent.capacity() == 0) s.recent.reserve(kRememberedBatches + 1);
  s.recent.push_back(Written{batch.first_sequence, batch.last_sequence, -1, {}});
  if (s.recent.size() > kRememberedBatches) {
    fail_waiting(s.recent.front());
    s.recent.erase(s.recent.begin());
  }
  return out;
}

ProducerStates::Written* ProducerStates::find(const std::string& partition, const SequencedBatch& batch) {
  auto it = states_.find(key(partition, batch.producer_id));
  if (it == states_.end() || it->second.epoch != batch.epoch) return nullptr;
  for (Written& w : it->second.recent) {
    if (w.first == batch.first_sequence && w.last == batch.last_sequence) return &w;
  }
  return nullptr;
}

bool ProducerStates::written(const std::string& partition, const SequencedBatch& batch, int64_t base_offset) {
  Written* w = find(partition, batch);
  if (w == nullptr) {
    // Expired or under a new epoch meanwhile: nothing of it is kept. Taken
    // back by an earlier batch's failure: it is now ahead of what is kept.
    auto it = states_.find(key(partition, batch.producer_id));
    return it == states_.end() || it->second.epoch != batch.epoch ||
           at_or_before(batch.first_sequence, it->second.last_sequence);
  }
  if (w->base_offset >= 0) return true;
  w->base_offset = base_offset;
  auto waiting = std::move(w->waiting);
  w->waiting.clear();
  for (auto& done : waiting) done(kNone, base_offset);
  return true;
}

bool ProducerStates::when_written(const std::string& partition, const SequencedBatch& batch, WrittenCallback done) {
  Written* w = find(partition, batch);
  if (w == nullptr || w->base_offset >= 0) return false;
  w->waiting.push_back(std::move(done));
  return true;
}

void ProducerStates::failed(const std::string& partition, const SequencedBatch& batch) {
  auto it = states_.find(key(partition, batch.producer_id));
  if (it == states_.end() || it->second.epoch != batch.epoch) return;
  State& s = it->second;
  auto w = std::find_if(s.recent.begin(), s.recent.end(), [&](const Written& r) {
    return r.first == batch.first_sequence && r.last == batch.last_sequence && r.base_offset < 0;
  });
  if (w == s.recent.end()) return;  // taken back already, with an earlier batch
  s.last_sequence = before(batch.first_sequence);
  std::vector<Written> dropped(std::make_move_iterator(w), std::make_move_iterator(s.recent.end()));
  s.recent.erase(w, s.recent.end());
  fail_waiting(dropped);
}

void ProducerStates::fail_waiting(Written& batch) {
  auto waiting = std::move(batch.waiting);
  batch.waiting.clear();
  for (auto& done : waiting) done(kKafkaStorageError, -1);
}

void ProducerStates::fail_waiting(std::vector<Written>& batches) {
  for (Written& w : batches) fail_waiting(w);
}

void ProducerStates::evict_oldest(const std::string& keep, int64_t now_ms) {
  static common::Counter& evicted = common::MetricsRegistry::global().counter(
      "magnetar_kafka_producer_states_evicted_total",
      "Idempotent producers' sequence states dropped, least recently used first, at the per-reactor bound; a "
      "retry of an old batch of theirs may be written twice");
  std::vector<int64_t> used;
  used.reserve(states_.size());
  for (const auto& [k, state] : states_) {
    if (k != keep) used.push_back(state.last_used_ms);
  }
  const size_t drop = std::max<size_t>(1, max_states_ / 10);
  if (used.empty()) return;
  const size_t nth = std::min(drop, used.size()) - 1;
  std::nth_element(used.begin(), used.begin() + static_cast<std::ptrdiff_t>(nth), used.end());
  const int64_t cutoff = used[nth];
  size_t dropped = 0;
  for (auto it = states_.begin(); it != states_.end() && dropped < drop;) {
    if (it->first == keep || it->second.last_used_ms > cutoff) {
      ++it;
      continue;
    }
    std::vector<Written> recent = std::move(it->second.recent);
    it = states_.erase(it);
    fail_waiting(recent);
    ++dropped;
  }
  evicted.inc(dropped);
  if (now_ms - last_evict_warn_ms_ < 60 * 1000) return;  // a line a minute at most
  last_evict_warn_ms_ = now_ms;
  MLOG_WARN("kafka: {} idempotent producer states on this reactor reached the bound of {}: the {} least recently "
            "used dropped", states_.size() + dropped, max_states_, dropped);
}

int64_t ProducerIds::next(int64_t now_ms) {
  constexpr int kSlot = kCounterBits + kNodeBits;
  constexpr int64_t kCounterMask = (int64_t{1} << kCounterBits) - 1;
  const int64_t node = int64_t{node_} << kCounterBits;
  int64_t last = last_.load(std::memory_order_relaxed);
  for (;;) {
    int64_t ms = std::max<int64_t>(now_ms - kEpochMs, 0);
    int64_t counter = 0;
    if ((ms << kSlot) <= last) {
      // This millisecond (or a later one, the clock having stepped back)
      // was used already: the next counter value, or the next millisecond.
      ms = last >> kSlot;
      counter = (last & kCounterMask) + 1;
      if (counter > kCounterMask) {
        ++ms;
        counter = 0;
      }
    }
    const int64_t id = (ms << kSlot) | node | counter;
    if (last_.compare_exchange_weak(last, id, std::memory_order_relaxed)) return id;
  }
}

void ProducerStates::expire_idle(int64_t now_ms) {
  if (now_ms < next_expiry_ms_) return;
  next_expiry_ms_ = now_ms + 60 * 1000;
  for (auto it = states_.begin(); it != states_.end();) {
    if (now_ms - it->second.last_used_ms <= kExpiryMs) {
      ++it;
      continue;
    }
    // Retries still waiting for their batch are answered, never left hanging.
    std::vector<Written> recent = std::move(it->second.recent);
    it = states_.erase(it);
    fail_waiting(recent);
  }
}

}  // namespace magnetar::protocol::kafka
