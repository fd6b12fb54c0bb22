// ReplicatedStorage: copies that move: off a decommissioned node, and off a
// lost one (self-healing).
#include <algorithm>
#include <memory>
#include <random>
#include <utility>

#include "cluster/rpc_records.h"
#include "common/clock.h"
#include "common/logging.h"
#include "replication/placement.h"
#include "replication/replicated_storage.h"
#include "replication/replication_generated.h"
#include "replication/requests.h"
#include "replication/storage_server.h"

namespace magnetar::replication {

using common::ErrorCode;
using common::Result;
using common::Slice;
using common::Status;
using runtime::Reactor;
using storage::Callback;

std::vector<NodeId> ReplicatedStorage::copy_targets(const LedgerMeta& meta, size_t fragment,
                                                    std::vector<NodeId> candidates) {
  const std::vector<NodeId>& in_fragment = meta.fragments[fragment].nodes;
  const std::vector<NodeId>& writing = meta.fragments.back().nodes;
  const bool open = meta.state != LedgerState::kClosed;
  const std::vector<NodeId> holding = meta.all_nodes();
  auto has = [](const std::vector<NodeId>& v, NodeId n) { return std::find(v.begin(), v.end(), n) != v.end(); };
  candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                  [&](NodeId n) { return has(in_fragment, n) || (open && has(writing, n)); }),
                   candidates.end());
  static thread_local std::mt19937_64 rng(std::random_device{}());
  std::shuffle(candidates.begin(), candidates.end(), rng);
  std::stable_partition(candidates.begin(), candidates.end(), [&](NodeId n) { return !has(holding, n); });
  return candidates;
}

namespace {

// The bytes and entries of `entries` that `keep` holds (what a copy sends).
uint64_t copied_bytes(const std::vector<storage::Entry>& entries, const Stripe& keep) {
  uint64_t bytes = 0;
  for (const storage::Entry& e : entries) bytes += keep.holds(e.id) ? e.data.size() : 0;
  return bytes;
}

uint64_t copied_count(const std::vector<storage::Entry>& entries, const Stripe& keep) {
  uint64_t count = 0;
  for (const storage::Entry& e : entries) count += keep.holds(e.id) ? 1 : 0;
  return count;
}

}  // namespace

// ---- decommissioning ----

std::vector<NodeId> ReplicatedStorage::draining() const {
  std::lock_guard lock(mu_);
  return draining_copy_;
}

std::vector<NodeId> ReplicatedStorage::placeable(std::vector<NodeId> live) const {
  live.erase(std::remove_if(live.begin(), live.end(), [this](NodeId n) { return draining_.count(n) != 0; }),
             live.end());
  return live;
}

void ReplicatedStorage::refresh_draining() {
  store_.list_children(kDrainingPrefix, [this](Result<std::vector<std::string>> names) {
    if (!names || stopped_) return;
    std::set<NodeId> now;
    for (const std::string& name : *names) {
      char* end = nullptr;
      const unsigned long long node = std::strtoull(name.c_str(), &end, 10);
      if (end != nullptr && *end == '\0' && node != 0) now.insert(node);
    }
    bool added = false;
    for (NodeId n : now) added = added || draining_.count(n) == 0;
    draining_ = std::move(now);
    {
      std::lock_guard lock(mu_);
      draining_copy_.assign(draining_.begin(), draining_.end());
    }
    if (!added) return;
    MLOG_INFO("replicated storage: storage nodes being decommissioned: {}", draining_.size());
    std::vector<LedgerId> mine;
    for (const auto& [id, l] : ledgers_) {
      if (l.writing) mine.push_back(id);
    }
    for (LedgerId id : mine) move_off_draining(id);
    heal_pass();
  });
}

// The writer moves its open ledger's copy off a draining node.
void ReplicatedStorage::move_off_draining(LedgerId id) {
  if (draining_.empty() || stopped_) return;
  auto it = ledgers_.find(id);
  if (it == ledgers_.end()) return;
  Ledger& l = it->second;
  if (!l.writing || l.moving || l.changing || l.closing || !l.failure.is_ok() || l.meta.state != LedgerState::kOpen) {
    return;
  }
  const Fragment& last = l.meta.fragments.back();
  NodeId leaving = 0;
  std::vector<NodeId> staying;
  for (NodeId n : last.nodes) {
    if (leaving == 0 && draining_.count(n) != 0 && l.failed.count(n) == 0) {
      leaving = n;
    } else {
      staying.push_back(n);
    }
  }
  if (leaving == 0) return;
  std::vector<NodeId> candidates;
  for (NodeId n : placeable(transport_.live_storage_nodes())) {
    if (l.failed.count(n) == 0) candidates.push_back(n);
  }
  candidates = copy_targets(l.meta, l.meta.fragments.size() - 1, std::move(candidates));
  if (candidates.empty()) return;  // the copy stays until a node is free or the ledger closes and the healer moves it
  const std::vector<NodeId> chosen = choose_in_tiers(
      affinity_tiers(candidates, affinity_of(l.meta), [this](NodeId n) { return group_of(n); }), staying, 1,
      [this](NodeId n) { return zone_of(n); });
  if (chosen.empty()) return;  // no node of the ledger's storage groups to take it
  const NodeId target = chosen.front();
  MLOG_INFO("replicated storage: moving ledger {}'s copy from entry {} off storage node {} (decommissioned) to {}", id,
            last.first_entry, leaving, target);
  l.moving = true;
  move_copy(id, leaving, target, last.first_entry, last.first_entry, 0);
}

// Copies the last fragment's entries next..LAC to `target`, in batches,
// while adds go on; once close to the LAC, holds the adds (so the LAC stays
// put), copies the rest and names `target` in `leaving`'s place.
void ReplicatedStorage::move_copy(LedgerId id, NodeId leaving, NodeId target, EntryId first, EntryId next,
                                  int rounds) {
  auto it = ledgers_.find(id);
  if (it == ledgers_.end()) return;
  Ledger& l = it->second;
  if (!l.moving) return;
  const Fragment& last = l.meta.fragments.back();
  const bool unchanged = !stopped_ && l.writing && l.failure.is_ok() && !l.closing &&
                         l.meta.state == LedgerState::kOpen && last.first_entry == first &&
                         std::find(last.nodes.begin(), last.nodes.end(), leaving) != last.nodes.end() &&
                         l.failed.count(leaving) == 0 && draining_.count(leaving) != 0;
  if (!unchanged) return end_move(id, l);
  if (!l.move_holds && (next > l.lac || rounds >= 8 || l.lac - next < 256)) {
    if (l.changing) return end_move(id, l);  // another change under way: tried again after it
    l.changing = true;
    l.move_holds = true;
  }
  if (next > l.lac) {
    // `target` holds first..LAC and the adds are held: it takes `leaving`'s place.
    LedgerMeta changed = l.meta;
    std::replace(changed.fragments.back().nodes.begin(), changed.fragments.back().nodes.end(), leaving, target);
    l.moving = false;
    l.move_holds = false;
    moved_copies_.inc();
    return change_ensemble(id, l, std::move(changed), leaving, target);
  }
  const EntryId lac = l.lac;
  read_from(id, l.meta, next, lac, 0, nullptr,
            [this, id, leaving, target, first, lac, rounds](Result<std::vector<storage::Entry>> got) {
              auto found = ledgers_.find(id);
              if (found == ledgers_.end()) return;
              if (!got || got->empty()) {
                MLOG_WARN("replicated storage: moving ledger {}'s copy: cannot read its entries: {}", id,
                          got ? std::string("none returned") : got.status().to_string());
                return end_move(id, found->second);
              }
              auto entries = std::make_shared<std::vector<storage::Entry>>(std::move(got.value()));
              const EntryId after = entries->back().id + 1;
              // Striped, the new node takes the leaving one's stripe.
              const LedgerMeta& meta = found->second.meta;
              const size_t last_fragment = meta.fragments.size() - 1;
              const Stripe keep = meta.stripe_of(last_fragment, leaving);
              send_copies(id, target, lac, false, keep.next_held(first), entries, keep,
                          stripe_info(meta, last_fragment, leaving, target),
                          [this, id, leaving, target, first, after, rounds, entries, keep](Status st) {
                auto found = ledgers_.find(id);
                if (found == ledgers_.end()) return;
                if (!st.is_ok()) {
                  MLOG_WARN("replicated storage: moving ledger {}'s copy: the new node refused an entry: {}", id,
                            st.to_string());
                  return end_move(id, found->second);
                }
                // Throttled while adds go on; once they are held, the rest goes at once.
                after_copied(copied_bytes(*entries, keep), !found->second.move_holds,
                             [this, id, leaving, target, first, after, rounds]() {
                               move_copy(id, leaving, target, first, after, rounds + 1);
                             });
              });
            });
}

void ReplicatedStorage::end_move(LedgerId id, Ledger& l) {
  l.moving = false;
  if (!l.move_holds) return;
  l.move_holds = false;
  l.changing = false;
  if (!l.failure.is_ok()) {
    if (l.closing) seal(id);
    return;
  }
  resume_adds(id, l);
}

// ---- self-healing ----

struct ReplicatedStorage::Healing {
  std::deque<LedgerId> queue;
  std::vector<NodeId> live;
  int64_t underreplicated = 0;
  int64_t healed = 0;
  int64_t wait_ms = -1;  // the soonest a lost node's grace ends, when one is still within it
};

void ReplicatedStorage::heal_pass() {
  if (healing_ || stopped_ || !heals_ || !heals_()) return;
  auto h = std::make_shared<Healing>();
  h->live = transport_.live_storage_nodes();
  for (auto it = gone_since_ms_.begin(); it != gone_since_ms_.end();) {
    if (std::find(h->live.begin(), h->live.end(), it->first) != h->live.end()) {
      it = gone_since_ms_.erase(it);
    } else {
      ++it;
    }
  }
  healing_ = true;
  store_.list_children(kLedgersPrefix, [this, h](Result<std::vector<std::string>> names) {
    if (!names) {
      healing_ = false;
      return;
    }
    for (const std::string& name : *names) {
      char* end = nullptr;
      const unsigned long long id = std::strtoull(name.c_str(), &end, 10);
      if (end != nullptr && *end == '\0') h->queue.push_back(id);
    }
    heal_next(h);
  });
}

void ReplicatedStorage::heal_next(const std::shared_ptr<Healing>& h) {
  if (stopped_ || h->queue.empty()) {
    healing_ = false;
    if (stopped_) return;
    underreplicated_.set(static_cast<double>(h->underreplicated));
    heal_status_.underreplicated = h->underreplicated;
    heal_status_.copying = false;
    publish_healing(true);
    // A pass mends one fragment per ledger: while it mends some, the next
    // pass follows at once. A lost node's grace that ends before the next
    // pass is due gets a pass of its own then.
    if (h->healed > 0) {
      run([this]() { heal_pass(); });
    } else if (h->wait_ms >= 0 && h->wait_ms < settings_.heal_interval.count() && grace_timer_) {
      grace_timer_->once(std::chrono::milliseconds(h->wait_ms + 10), [this]() { heal_pass(); });
    }
    return;
  }
  const LedgerId id = h->queue.front();
  h->queue.pop_front();
  store_.get(ledger_key(id), [this, h, id](Result<metadata::Record> rec) {
    if (!rec) return heal_next(h);
    auto meta = decode_ledger_meta(rec->value);
    if (!meta) return heal_next(h);
    const int64_t now = common::monotonic_ms();
    std::optional<std::pair<size_t, NodeId>> due;
    for (size_t i = 0; i < meta->fragments.size(); ++i) {
      for (NodeId n : meta->fragments[i].nodes) {
        const bool lost = std::find(h->live.begin(), h->live.end(), n) == h->live.end();
        const bool leaving = draining_.count(n) != 0;
        if (!lost && !leaving) continue;
        h->underreplicated++;
        // A decommissioned node's copies move at once; a lost one's after the grace.
        const int64_t gone_ms = now - gone_since_ms_.emplace(n, now).first->second;
        const bool ready = leaving || gone_ms >= settings_.heal_grace.count();
        if (!ready) {
          const int64_t left = settings_.heal_grace.count() - gone_ms;
          h->wait_ms = h->wait_ms < 0 ? left : std::min(h->wait_ms, left);
        }
        // Not an open ledger's last fragment: that one is its writer's to mend.
        const bool settled = meta->state == LedgerState::kClosed ||
                             (meta->state == LedgerState::kOpen && i + 1 < meta->fragments.size());
        if (settled && ready && !due) due = {i, n};
      }
    }
    if (!due) return heal_next(h);
    const auto [fragment, gone] = *due;
    const std::vector<NodeId> spare = copy_targets(*meta, fragment, placeable(h->live));
    if (spare.empty()) return heal_next(h);  // nowhere to put a copy: it stays short
    std::vector<NodeId> staying;
    for (NodeId n : meta->fragments[fragment].nodes) {
      if (n != gone) staying.push_back(n);
    }
    const std::vector<NodeId> chosen = choose_in_tiers(
        affinity_tiers(spare, affinity_of(*meta), [this](NodeId n) { return group_of(n); }), staying, 1,
        [this](NodeId n) { return zone_of(n); });
    if (chosen.empty()) return heal_next(h);  // no node of the ledger's storage groups to take it
    const NodeId target = chosen.front();
    const EntryId first = meta->fragments[fragment].first_entry;
    const EntryId end = meta->fragment_end(fragment, meta->last_entry);
    MLOG_INFO("replicated storage: healing ledger {} entries {}..{}: copying what storage node {} held to {}", id,
              first, end, gone, target);
    heal_status_.copying = true;
    heal_status_.ledger = id;
    heal_status_.first_entry = first;
    heal_status_.last_entry = end;
    heal_status_.next_entry = first;
    heal_status_.from_node = gone;
    heal_status_.to_node = target;
    heal_status_.copied_bytes = 0;
    heal_status_.started_ms = common::wall_clock_ms();
    publish_healing(true);
    heal_copy(h, id, *meta, fragment, gone, target, first, end);
  });
}

void ReplicatedStorage::heal_copy(const std::shared_ptr<Healing>& h, LedgerId id, LedgerMeta meta, size_t fragment,
                                  NodeId gone, NodeId target, EntryId next, EntryId end) {
  if (stopped_) return heal_next(h);
  if (next > end) return heal_record(h, id, fragment, gone, target);
  heal_status_.next_entry = next;
  publish_healing(false);
  read_from(id, meta, next, end, 0, nullptr,
            [this, h, id, meta, fragment, gone, target, end](Result<std::vector<storage::Entry>> got) {
              if (!got || got->empty()) {
                MLOG_WARN("replicated storage: healing ledger {}: cannot read its entries: {}", id,
                          got ? std::string("none returned") : got.status().to_string());
                heal_status_.copying = false;
                return heal_next(h);
              }
              // A read's worth in flight (up to 8 MiB), then the next read once the throttle allows.
              auto entries = std::make_shared<std::vector<storage::Entry>>(std::move(got.value()));
              const EntryId after = entries->back().id + 1;
              const Stripe keep = meta.stripe_of(fragment, gone);
              const uint64_t count = copied_count(*entries, keep);
              const uint64_t bytes = copied_bytes(*entries, keep);
              send_copies(id, target, meta.last_entry, true, keep.next_held(meta.fragments[fragment].first_entry),
                          entries, keep, stripe_info(meta, fragment, gone, target),
                          [this, h, id, meta, fragment, gone, target, end, after, count, bytes](Status st) {
                            if (!st.is_ok()) {
                              MLOG_WARN("replicated storage: healing ledger {}: the new copy refused an entry: {}",
                                        id, st.to_string());
                              heal_status_.copying = false;
                              return heal_next(h);
                            }
                            healed_entries_.inc(count);
                            heal_status_.copied_bytes += bytes;
                            heal_status_.healed_bytes += bytes;
                            after_copied(bytes, true, [this, h, id, meta, fragment, gone, target, after, end]() {
                              heal_copy(h, id, meta, fragment, gone, target, after, end);
                            });
                          });
            },
            copy_batch_bytes());
}

void ReplicatedStorage::fill_copy(LedgerId id, LedgerMeta meta, NodeId node, EntryId first, EntryId next,
                                  EntryId end) {
  if (stopped_ || next > end) return;
  read_from(id, meta, next, end, 0, nullptr,
            [this, id, meta, node, first, end](Result<std::vector<storage::Entry>> got) {
              if (!got || got->empty()) {
                MLOG_WARN("replicated storage: ledger {}: cannot read the entries storage node {} lacks: {}", id,
                          node, got ? std::string("none returned") : got.status().to_string());
                return;
              }
              auto entries = std::make_shared<std::vector<storage::Entry>>(std::move(got.value()));
              const EntryId after = entries->back().id + 1;
              const size_t last = meta.fragments.size() - 1;
              const Stripe keep = meta.stripe_of(last, node);
              send_copies(id, node, meta.last_entry, true, keep.next_held(first), entries, keep,
                          stripe_info(meta, last), [this, id, meta, node, first, end, after, entries, keep](Status st) {
                            if (!st.is_ok()) {
                              MLOG_WARN("replicated storage: ledger {}: storage node {} refused an entry it lacks: {}",
                                        id, node, st.to_string());
                              return;
                            }
                            healed_entries_.inc(copied_count(*entries, keep));
                            after_copied(copied_bytes(*entries, keep), true,
                                         [this, id, meta, node, first, after, end]() {
                                           fill_copy(id, meta, node, first, after, end);
                                         });
                          });
            },
            copy_batch_bytes());
}

void ReplicatedStorage::send_copies(LedgerId id, NodeId target, EntryId lac, bool recovery, EntryId run_start,
                                    std::shared_ptr<std::vector<storage::Entry>> entries, const Stripe& keep,
                                    const std::optional<StripeInfo>& stripe, std::function<void(Status)> done) {
  struct Batch {
    size_t left = 0;
    Status first_failure;
    std::function<void(Status)> done;
  };
  auto batch = std::make_shared<Batch>();
  for (const storage::Entry& e : *entries) batch->left += keep.holds(e.id) ? 1 : 0;
  batch->done = std::move(done);
  if (batch->left == 0) return run([batch]() { batch->done(Status::ok()); });
  for (const storage::Entry& e : *entries) {
    if (!keep.holds(e.id)) continue;
    transport_.call(
        target, StorageMethod::kAdd,
        encode_add(id, e.id, lac, recovery, 255, 0, e.data.data(), e.data.size(), e.id == run_start,
                   stripe ? &*stripe : nullptr),
        [batch](Result<std::string> reply) {
          Status st = reply ? decode_outcome(*reply) : reply.status();
          if (!st.is_ok() && batch->first_failure.is_ok()) batch->first_failure = st;
          if (--batch->left == 0) batch->done(batch->first_failure);
        },
        settings_.add_timeout_ms);
  }
}

uint32_t ReplicatedStorage::copy_batch_bytes() const {
  if (settings_.heal_rate_bytes == 0) return 0;
  return static_cast<uint32_t>(std::clamp<uint64_t>(settings_.heal_rate_bytes / 8, 4096, 8u << 20));
}

void ReplicatedStorage::after_copied(uint64_t bytes, bool throttled, runtime::Task next) {
  healed_bytes_.inc(bytes);
  const int64_t now = common::monotonic_ms();
  if (settings_.heal_rate_bytes == 0 || !throttled || stopped_) return next();
  // One window for every copy under way: it restarts after a second without copying.
  if (throttle_bytes_ == 0 || now - throttle_since_ms_ > 1000 + static_cast<int64_t>(
                                       throttle_bytes_ * 1000 / settings_.heal_rate_bytes)) {
    throttle_since_ms_ = now;
    throttle_bytes_ = 0;
  }
  throttle_bytes_ += bytes;
  const int64_t due = throttle_since_ms_ + static_cast<int64_t>(throttle_bytes_ * 1000 / settings_.heal_rate_bytes);
  if (due <= now) return next();
  throttled_.emplace_back(due, std::move(next));
  // Dues only grow, so the first waiting is the next due.
  if (throttled_.size() == 1) throttle_timer_->once(std::chrono::milliseconds(due - now), [this]() { run_throttled(); });
}

void ReplicatedStorage::run_throttled() {
  const int64_t now = common::monotonic_ms();
  while (!stopped_ && !throttled_.empty() && throttled_.front().first <= now) {
    runtime::Task task = std::move(throttled_.front().second);
    throttled_.pop_front();
    task();
  }
  if (stopped_ || throttled_.empty()) return;
  throttle_timer_->once(std::chrono::milliseconds(throttled_.front().first - now), [this]() { run_throttled(); });
}

void ReplicatedStorage::heal_record(const std::shared_ptr<Healing>& h, LedgerId id, size_t fragment, NodeId gone,
                                    NodeId target) {
  heal_status_.copying = false;
  store_.get(ledger_key(id), [this, h, id, fragment, gone, target](Result<metadata::Record> rec) {
    if (!rec) return heal_next(h);
    auto meta = decode_ledger_meta(rec->value);
    if (!meta || fragment >= meta->fragments.size()) return heal_next(h);
    auto& nodes = meta->fragments[fragment].nodes;
    auto at = std::find(nodes.begin(), nodes.end(), gone);
    if (at == nodes.end()) return heal_next(h);  // changed meanwhile: the next pass looks again
    *at = target;
    const LedgerMeta healed = *meta;
    store_.put(ledger_key(id), encode_ledger_meta(healed), metadata::PutOptions{rec->stat.version, 0},
               [this, h, id, healed, gone, target](Result<metadata::Stat> put) {
                 if (put) {
                   healed_fragments_.inc();
                   heal_status_.healed_fragments++;
                   h->healed++;
                   h->underreplicated = std::max<int64_t>(0, h->underreplicated - 1);
                   MLOG_INFO("replicated storage: ledger {} healed: storage node {} holds what {} held", id, target,
                             gone);
                   auto cached = ledgers_.find(id);
                   if (cached != ledgers_.end() && !cached->second.writing) {
                     cached->second.meta = healed;
                     cached->second.version = put->version;
                   }
                 }
                 heal_next(h);
               });
  });
}

void ReplicatedStorage::publish_healing(bool now) {
  const int64_t at = common::monotonic_ms();
  if (!now && at - heal_published_ms_ < 1000) return;
  HealingStatus s = heal_status_;
  const std::string unchanged = encode_healing(s);
  // Passes that find nothing new write nothing.
  if (!s.copying && unchanged == heal_published_) return;
  heal_published_ = unchanged;
  heal_published_ms_ = at;
  s.updated_ms = common::wall_clock_ms();
  store_.put(kHealingKey, encode_healing(s), metadata::PutOptions{metadata::kAnyVersion, 0},
             [](Result<metadata::Stat> put) {
               if (!put) MLOG_DEBUG("replicated storage: the healing status was not written: {}", put.status().to_string());
             });
}

}  // namespace magnetar::replication
