#include "replication/replicated_storage.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <utility>

#include "cluster/rpc_records.h"
#include "common/clock.h"
#include "common/logging.h"
#include "replication/placement.h"
#include "replication/requests.h"
#include "replication/replication_generated.h"
#include "replication/storage_server.h"

namespace magnetar::replication {

using common::ErrorCode;
using common::Result;
using common::Slice;
using common::Status;
using runtime::Reactor;
using storage::Callback;
using storage::LedgerWriter;

namespace {

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Entries of a read answer, in order: their ids and bytes (in the answers).
using ReadBytes = std::vector<std::pair<EntryId, const flatbuffers::Vector<uint8_t>*>>;

// `read`'s entries copied into one buffer for the batch, each a slice of it.
std::vector<storage::Entry> one_buffer(LedgerId id, const ReadBytes& read) {
  size_t total = 0;
  for (const auto& [entry, bytes] : read) total += bytes->size();
  Slice buffer = Slice::allocate(std::max<size_t>(total, 1));
  std::vector<storage::Entry> entries;
  entries.reserve(read.size());
  size_t at = 0;
  for (const auto& [entry, bytes] : read) {
    const size_t n = bytes->size();
    if (n > 0) std::memcpy(buffer.mutable_data() + at, bytes->data(), n);
    entries.push_back(storage::Entry{id, entry, buffer.sub(at, n)});
    at += n;
  }
  return entries;
}

}  // namespace

ReplicatedStorage::ReplicatedStorage(Transport& transport, metadata::Store& store, storage::Storage& local,
                                     ReplicationSettings settings)
    : transport_(transport),
      store_(store),
      local_(local),
      settings_(settings),
      ensemble_changes_(common::MetricsRegistry::global().counter(
          "magnetar_replication_ensemble_changes_total",
          "Storage nodes replaced in a ledger's ensemble after they failed an add")),
      recoveries_(common::MetricsRegistry::global().counter(
          "magnetar_replication_recoveries_total", "Replicated ledgers fenced and closed by a new owner")),
      recovered_entries_(common::MetricsRegistry::global().counter(
          "magnetar_replication_recovered_entries_total",
          "Entries past the last add confirmed that a recovery found and wrote to a full write quorum")),
      degraded_adds_(common::MetricsRegistry::global().counter(
          "magnetar_replication_degraded_ledgers_total",
          "Ledgers that lost a storage node with none to replace it and went on under-replicated")),
      healed_fragments_(common::MetricsRegistry::global().counter(
          "magnetar_replication_healed_fragments_total",
          "Fragments of closed ledgers copied from a lost storage node's peers to another node")),
      healed_entries_(common::MetricsRegistry::global().counter(
          "magnetar_replication_healed_entries_total", "Entries copied to another node by self-healing")),
      healed_bytes_(common::MetricsRegistry::global().counter(
          "magnetar_replication_healed_bytes_total",
          "Bytes copied to another node by self-healing and decommissioning")),
      moved_copies_(common::MetricsRegistry::global().counter(
          "magnetar_replication_moved_copies_total",
          "Copies of open ledgers a writer moved off a storage node being decommissioned")),
      underreplicated_(common::MetricsRegistry::global().gauge(
          "magnetar_replication_underreplicated_fragments",
          "Copies named by ledger records on storage nodes that are not live or are being decommissioned, as of "
          "the last healing pass (on the member that heals)")) {}

ReplicatedStorage::~ReplicatedStorage() { stop(); }

Status ReplicatedStorage::start() {
  return transport_.reactor().run_sync([this]() -> Status {
    // Watched from the transport reactor: the changes arrive there.
    auto watched = store_.watch(std::string(kDrainingPrefix) + "/", [this](const metadata::Event&) {
      refresh_draining();
    });
    if (!watched) return watched.status();
    draining_watch_ = *watched;
    refresh_draining();
    throttle_timer_ = std::make_unique<runtime::Timer>(transport_.reactor());
    heal_status_.healer = transport_.self();
    heal_status_.rate_limit_bytes = settings_.heal_rate_bytes;
    if (settings_.heal_interval.count() > 0) {
      heal_timer_ = std::make_unique<runtime::Timer>(transport_.reactor());
      grace_timer_ = std::make_unique<runtime::Timer>(transport_.reactor());
      heal_timer_->every(settings_.heal_interval, [this]() {
        // A move given up (a node failed to answer) is tried again here.
        if (!draining_.empty()) {
          std::vector<LedgerId> mine;
          for (const auto& [id, l] : ledgers_) {
            if (l.writing) mine.push_back(id);
          }
          for (LedgerId id : mine) move_off_draining(id);
        }
        heal_pass();
      });
    }
    return Status::ok();
  });
}

void ReplicatedStorage::stop() {
  // Once stopped, the transport (and its reactor) may be gone.
  if (stop_requested_.exchange(true)) return;
  transport_.reactor().run_sync([this]() {
    stopped_ = true;
    heal_timer_.reset();
    grace_timer_.reset();
    throttle_timer_.reset();
    if (draining_watch_ != 0) store_.unwatch(draining_watch_);
    draining_watch_ = 0;
    for (auto& [id, l] : ledgers_) {
      for (PendingAdd& add : l.pending) deliver(add.home, [done = add.done]() { done(Status::unavailable("storage is stopping")); });
      l.pending.clear();
      for (CloseDone& c : l.closers) {
        deliver(c.first, [done = c.second]() { done(Status::unavailable("storage is stopping")); });
      }
      l.closers.clear();
    }
  });
}

void ReplicatedStorage::run(runtime::Task task) {
  Reactor& r = transport_.reactor();
  if (r.is_on_thread()) {
    // Never inline: callers expect their callback after the call returns.
    if (!r.try_post(task).is_ok() && task) task();
    return;
  }
  // Never dropped for a full mailbox: a call's callback must run.
  if (!r.post_reliably(std::move(task))) MLOG_WARN("replicated storage: a call arrived after the cluster stopped");
}

void ReplicatedStorage::deliver(Reactor* home, runtime::Task fn) {
  if (home == nullptr) return fn();
  if (!home->post_reliably(std::move(fn))) MLOG_DEBUG("replicated storage: reactor {} stopped before an answer", home->name());
}

void ReplicatedStorage::create_ledger(LedgerId id, Callback<Result<LedgerWriter>> done) {
  create_ledger_with(id, storage::LedgerOptions{}, std::move(done));
}

void ReplicatedStorage::create_ledger_with(LedgerId id, const storage::LedgerOptions& options,
                                           Callback<Result<LedgerWriter>> done) {
  Reactor* home = Reactor::current();
  run([this, id, options, home, done]() {
    auto answer = [this, home, done](Result<LedgerWriter> r) { deliver(home, [done, r]() { done(r); }); };
    if (stopped_) return answer(Status::unavailable("storage is stopping"));
    if (ledgers_.count(id) != 0) return answer(Status::already_exists("ledger " + std::to_string(id) + " exists"));
    const Affinity affinity{options.affinity_primary, options.affinity_secondary};
    std::vector<std::vector<NodeId>> tiers = affinity_tiers(placeable(transport_.live_storage_nodes()), affinity,
                                                            [this](NodeId node) { return group_of(node); });
    int n = 0;
    for (const auto& tier : tiers) n += static_cast<int>(tier.size());
    int ensemble = options.ensemble > 0 ? options.ensemble : std::min(settings_.max_ensemble, n);
    int write_quorum = options.write_quorum > 0 ? options.write_quorum : ensemble;
    int ack_quorum = options.ack_quorum > 0 ? options.ack_quorum : std::min(settings_.max_ack_quorum, write_quorum);
    // Striped when the ensemble is larger than the write quorum.
    write_quorum = std::min(write_quorum, ensemble);
    ack_quorum = std::min(ack_quorum, write_quorum);
    if (n < ack_quorum || ack_quorum < 1) {
      const std::string where = affinity.any() ? " in storage groups '" + affinity.primary +
                                                     (affinity.secondary.empty() ? "" : "," + affinity.secondary) +
                                                     "' (the namespace's bookie affinity group)"
                                               : "";
      return answer(Status::unavailable("ledger " + std::to_string(id) + " needs " + std::to_string(ack_quorum) +
                                        " storage nodes" + where + " and " + std::to_string(n) + " are live"));
    }
    if (n < ensemble) {
      MLOG_WARN("replicated storage: ledger {} gets {} copies of the {} asked for: {} storage nodes are live", id, n,
                ensemble, n);
      ensemble = n;
      write_quorum = std::min(write_quorum, n);
    }
    // This node first (its reads stay local), the others at random, spread
    // across zones; the primary storage groups' nodes before the secondary's.
    static thread_local std::mt19937_64 rng(std::random_device{}());
    for (auto& tier : tiers) {
      std::shuffle(tier.begin(), tier.end(), rng);
      auto self = std::find(tier.begin(), tier.end(), transport_.self());
      if (self != tier.end()) std::iter_swap(tier.begin(), self);
    }
    const std::vector<NodeId> live =
        choose_in_tiers(tiers, {}, static_cast<size_t>(ensemble), [this](NodeId node) { return zone_of(node); });
    LedgerMeta meta;
    meta.affinity_primary = affinity.primary;
    meta.affinity_secondary = affinity.secondary;
    meta.ensemble = ensemble;
    meta.write_quorum = write_quorum;
    meta.ack_quorum = ack_quorum;
    meta.created_ms = wall_ms();
    meta.writer = transport_.self();
    meta.fragments.push_back(Fragment{0, live});
    store_.put(ledger_key(id), encode_ledger_meta(meta), metadata::PutOptions{metadata::kMustNotExist, 0},
               [this, id, meta, answer](Result<metadata::Stat> put) {
                 if (!put) return answer(put.status());
                 Ledger& l = ledgers_[id];
                 l.meta = meta;
                 l.version = put->version;
                 l.writing = true;
                 l.token = next_token_++;
                 publish_info(id, l);
                 publish_striping(id, l);
                 answer(LedgerWriter{id, l.token});
               });
  });
}

void ReplicatedStorage::open_ledger(LedgerId id, Callback<Result<LedgerWriter>> done) {
  // A replicated ledger is never written again by a new writer: the new
  // owner recovers and closes it (close_ledger) and starts another.
  Reactor* home = Reactor::current();
  run([this, id, home, done]() {
    with_record(id, [this, id, home, done](Result<Ledger*> l) {
      if (!l && l.status().code() == ErrorCode::kNotFound && local_only_.count(id) != 0) {
        return local_.open_ledger(id, [this, home, done](Result<LedgerWriter> w) { deliver(home, [done, w]() { done(w); }); });
      }
      Status st = l ? Status(ErrorCode::kFenced, "replicated ledger " + std::to_string(id) + " is recovered, not reopened")
                    : l.status();
      deliver(home, [done, st]() { done(st); });
    });
  });
}

Status ReplicatedStorage::set_fsync(LedgerId id, std::optional<storage::FsyncMode> mode,
                                    std::chrono::milliseconds interval) {
  {
    std::lock_guard lock(mu_);
    if (info_.count(id) != 0) {
      fsync_[id] = FsyncChoice{mode ? static_cast<uint8_t>(*mode) : uint8_t{255},
                               static_cast<uint32_t>(std::max<int64_t>(interval.count(), 0))};
      return Status::ok();
    }
  }
  return local_.set_fsync(id, mode, interval);
}

void ReplicatedStorage::add_entry(const LedgerWriter& writer, EntryId entry, Slice data, Callback<Status> done) {
  Reactor* home = Reactor::current();
  const LedgerId id = writer.ledger;
  FsyncChoice fsync;
  // The LAC the entry carries is this writer's as of now (an older one is
  // always safe to send).
  EntryId lac = storage::kNoEntry;
  bool replicated = false;
  std::shared_ptr<const Striping> striping;
  {
    std::lock_guard lock(mu_);
    auto info = info_.find(id);
    if (info != info_.end()) {
      replicated = true;
      lac = info->second.last_confirmed;
      auto f = fsync_.find(id);
      if (f != fsync_.end()) fsync = f->second;
      auto st = striping_.find(id);
      if (st != striping_.end()) striping = st->second;  // shared: no copy per add
    }
  }
  if (!replicated) return local_.add_entry(writer, entry, std::move(data), std::move(done));
  // Encoded here, on the caller's thread, not on the cluster reactor.
  std::string payload = encode_add(id, entry, lac, false, fsync.mode, fsync.interval_ms, data.data(), data.size(),
                                   false, striping ? &striping->info : nullptr);
  const uint32_t stripe_epoch = striping ? striping->epoch : 0;
  run([this, writer, entry, payload = std::move(payload), stripe_epoch, home, done]() mutable {
    auto fail = [this, home, done](Status st) { deliver(home, [done, st]() { done(st); }); };
    if (stopped_) return fail(Status::unavailable("storage is stopping"));
    auto it = ledgers_.find(writer.ledger);
    if (it == ledgers_.end() || !it->second.writing || it->second.token != writer.token) {
      return fail(Status(ErrorCode::kFenced, "not the writer of ledger " + std::to_string(writer.ledger)));
    }
    Ledger& l = it->second;
    if (!l.failure.is_ok()) return fail(l.failure);
    if (l.closing || l.meta.state != LedgerState::kOpen) {
      return fail(Status(ErrorCode::kFenced, "ledger " + std::to_string(writer.ledger) + " is closed"));
    }
    if (entry != l.next) {
      return fail(Status::invalid_argument("entry " + std::to_string(entry) + " is not the next, " +
                                           std::to_string(l.next)));
    }
    if (l.pending.size() >= settings_.max_pending_adds) {
      return fail(Status::resource_exhausted("too many adds waiting for their storage nodes"));
    }
    l.next++;
    l.pending.push_back(PendingAdd{entry, std::move(payload), {}, done, home, stripe_epoch});
    if (l.changing) return;  // sent once the new ensemble is recorded
    PendingAdd& add = l.pending.back();
    for (NodeId node : l.meta.write_set(entry)) {
      if (l.failed.count(node) == 0) send(writer.ledger, l, add, node);
    }
  });
}

void ReplicatedStorage::send(LedgerId id, Ledger& l, PendingAdd& add, NodeId node) {
  if (add.stripe_epoch != l.stripe_epoch) {
    // Encoded for an ensemble the writer has replaced a node of since.
    std::optional<StripeInfo> stripe = stripe_info(l.meta, l.meta.fragments.size() - 1);
    if (stripe) add.payload = restripe_add(add.payload, *stripe);
    add.stripe_epoch = l.stripe_epoch;
  }
  const EntryId entry = add.entry;
  transport_.call(
      node, StorageMethod::kAdd, add.payload,
      [this, id, entry, node](Result<std::string> reply) {
        Status st = reply ? decode_outcome(*reply) : reply.status();
        on_add_reply(id, entry, node, st);
      },
      settings_.add_timeout_ms);
}

void ReplicatedStorage::on_add_reply(LedgerId id, EntryId entry, NodeId node, Status st) {
  auto it = ledgers_.find(id);
  if (it == ledgers_.end() || !it->second.writing) return;
  Ledger& l = it->second;
  if (!st.is_ok()) {
    if (st.code() == ErrorCode::kFenced) return fail_ledger(id, l, st);
    return node_failed(id, l, node, st);
  }
  if (l.pending.empty() || entry < l.pending.front().entry) return;  // completed already
  const size_t at = static_cast<size_t>(entry - l.pending.front().entry);
  if (at >= l.pending.size()) return;
  PendingAdd& add = l.pending[at];
  if (l.failed.count(node) != 0) return;
  const std::vector<NodeId> set = l.meta.write_set(entry);
  if (std::find(set.begin(), set.end(), node) == set.end()) return;  // replaced meanwhile
  if (std::find(add.acked.begin(), add.acked.end(), node) == add.acked.end()) add.acked.push_back(node);
  complete(id, l);
}

void ReplicatedStorage::complete(LedgerId id, Ledger& l) {
  // While a new fragment is written every entry waits (as BookKeeper's
  // writer does): one completed meanwhile would never reach the new node,
  // whose fragment starts before it.
  if (l.changing) return;
  bool moved = false;
  while (!l.pending.empty() && static_cast<int>(l.pending.front().acked.size()) >= l.meta.ack_quorum) {
    PendingAdd add = std::move(l.pending.front());
    l.pending.pop_front();
    l.lac = add.entry;
    moved = true;
    deliver(add.home, [done = std::move(add.done)]() { done(Status::ok()); });
  }
  if (moved) publish_info(id, l);
  if (l.closing && l.pending.empty() && !l.changing) seal(id);
}

void ReplicatedStorage::node_failed(LedgerId id, Ledger& l, NodeId node, const Status& why) {
  const Fragment& current = l.meta.fragments.back();
  if (l.failed.count(node) != 0) return;
  if (std::find(current.nodes.begin(), current.nodes.end(), node) == current.nodes.end()) return;
  MLOG_WARN("replicated storage: storage node {} failed an add to ledger {}: {}", node, id, why.to_string());
  l.failed.insert(node);
  if (l.changing) return;  // the change under way is retried with this node out too
  std::vector<NodeId> spare;
  for (NodeId n : placeable(transport_.live_storage_nodes())) {
    if (l.failed.count(n) != 0) continue;
    if (std::find(current.nodes.begin(), current.nodes.end(), n) != current.nodes.end()) continue;
    spare.push_back(n);
  }
  static thread_local std::mt19937_64 rng(std::random_device{}());
  std::shuffle(spare.begin(), spare.end(), rng);
  // A node holding an older part of the ledger (a healed or moved copy) can
  // take only the entries that follow its own: one holding none comes first.
  const std::vector<NodeId> holding = l.meta.all_nodes();
  std::stable_partition(spare.begin(), spare.end(), [&holding](NodeId n) {
    return std::find(holding.begin(), holding.end(), n) == holding.end();
  });
  if (!spare.empty() && std::find(holding.begin(), holding.end(), spare.front()) == holding.end()) {
    spare.erase(std::remove_if(spare.begin(), spare.end(), [&holding](NodeId n) {
                  return std::find(holding.begin(), holding.end(), n) != holding.end();
                }),
                spare.end());
  }
  std::vector<NodeId> kept;
  for (NodeId n : current.nodes) {
    if (l.failed.count(n) == 0) kept.push_back(n);
  }
  const std::vector<NodeId> chosen = choose_in_tiers(affinity_tiers(spare, affinity_of(l.meta), [this](NodeId n) {
                                                       return group_of(n);
                                                     }),
                                                     kept, 1, [this](NodeId n) { return zone_of(n); });
  if (chosen.empty()) {
    // Going on needs an ack quorum left in every write set (striped, each
    // of the E sets of Qw nodes; else the one).
    size_t left = current.nodes.size();
    for (size_t k = 0; k < current.nodes.size(); ++k) {
      size_t in_set = 0;
      for (NodeId n : l.meta.write_set(current.first_entry + static_cast<EntryId>(k))) {
        in_set += l.failed.count(n) == 0 ? 1 : 0;
      }
      left = std::min(left, in_set);
    }
    if (static_cast<int>(left) < l.meta.ack_quorum) {
      return fail_ledger(id, l, Status::unavailable("ledger " + std::to_string(id) + ": fewer than " +
                                                    std::to_string(l.meta.ack_quorum) +
                                                    " storage nodes left in a write set"));
    }
    degraded_adds_.inc();
    MLOG_WARN("replicated storage: no storage node to replace {} in ledger {}; going on with {} copies", node, id,
              left);
    return complete(id, l);
  }
  const NodeId replacement = chosen.front();
  LedgerMeta next = l.meta;
  Fragment fragment = current;
  for (NodeId& n : fragment.nodes) {
    if (l.failed.count(n) != 0) {
      n = replacement;
      break;
    }
  }
  fragment.first_entry = l.lac + 1;
  if (next.fragments.back().first_entry == fragment.first_entry) {
    next.fragments.back() = fragment;
  } else {
    next.fragments.push_back(fragment);
  }
  change_ensemble(id, l, std::move(next), node, replacement);
}

void ReplicatedStorage::write_record(LedgerId id, int64_t version, LedgerMeta next, int attempt,
                                     std::function<void(Result<metadata::Stat>, LedgerMeta)> done) {
  store_.put(ledger_key(id), encode_ledger_meta(next), metadata::PutOptions{version, 0},
             [this, id, next, attempt, done](Result<metadata::Stat> put) {
               if (put || put.status().code() != ErrorCode::kFailedPrecondition || attempt >= 8) {
                 return done(std::move(put), next);
               }
               const Status conflict = put.status();
               store_.get(ledger_key(id), [this, id, next, attempt, done, conflict](Result<metadata::Record> rec) {
                 auto it = ledgers_.find(id);
                 auto stored = rec ? decode_ledger_meta(rec->value) : Result<LedgerMeta>(rec.status());
                 if (!stored || it == ledgers_.end()) return done(conflict, next);
                 // Only the healer changed it: still open, the same last fragment.
                 const LedgerMeta& mine = it->second.meta;
                 const Fragment& theirs = stored->fragments.back();
                 const bool healed = stored->state == LedgerState::kOpen &&
                                     stored->fragments.size() == mine.fragments.size() &&
                                     theirs.first_entry == mine.fragments.back().first_entry &&
                                     theirs.nodes == mine.fragments.back().nodes;
                 if (!healed) return done(conflict, next);
                 LedgerMeta merged = next;
                 for (size_t j = 0; j + 1 < mine.fragments.size(); ++j) merged.fragments[j] = stored->fragments[j];
                 write_record(id, rec->stat.version, std::move(merged), attempt + 1, done);
               });
             });
}

void ReplicatedStorage::change_ensemble(LedgerId id, Ledger& l, LedgerMeta proposed, NodeId old, NodeId replacement) {
  l.changing = true;
  write_record(id, l.version, std::move(proposed), 0,
             [this, id, old, replacement](Result<metadata::Stat> put, LedgerMeta next) {
               auto it = ledgers_.find(id);
               if (it == ledgers_.end()) return;
               Ledger& led = it->second;
               led.changing = false;
               if (!put) {
                 const bool taken = put.status().code() == ErrorCode::kFailedPrecondition;
                 return fail_ledger(id, led, taken ? Status(ErrorCode::kFenced, "ledger " + std::to_string(id) +
                                                                                    " is being recovered by another owner")
                                                   : put.status());
               }
               ensemble_changes_.inc();
               MLOG_INFO("replicated storage: ledger {} from entry {} on storage node {} in place of {}", id,
                         next.fragments.back().first_entry, replacement, old);
               led.meta = next;
               led.version = put->version;
               if (led.meta.striped()) {
                 led.stripe_epoch++;
                 publish_striping(id, led);
               }
               resume_adds(id, led);
               move_off_draining(id);
             });
}

void ReplicatedStorage::resume_adds(LedgerId id, Ledger& led) {
  // Every entry still waiting is in the last fragment: acks from nodes
  // outside it no longer count, and its new node gets them all.
  const std::vector<NodeId>& nodes = led.meta.fragments.back().nodes;
  for (PendingAdd& add : led.pending) {
    std::vector<NodeId> kept;
    for (NodeId n : add.acked) {
      if (std::find(nodes.begin(), nodes.end(), n) != nodes.end()) kept.push_back(n);
    }
    add.acked = std::move(kept);
  }
  for (PendingAdd& add : led.pending) {
    for (NodeId n : led.meta.write_set(add.entry)) {
      const bool had = std::find(add.acked.begin(), add.acked.end(), n) != add.acked.end();
      // The nodes kept were sent every entry already, unless it arrived
      // while the change was written (sent twice, a node stores it once).
      if (!had && led.failed.count(n) == 0) send(id, led, add, n);
    }
  }
  // A node that failed meanwhile is replaced in turn.
  for (NodeId n : led.meta.fragments.back().nodes) {
    if (led.failed.count(n) != 0) {
      led.failed.erase(n);
      node_failed(id, led, n, Status::unavailable("failed while the ensemble changed"));
      return;
    }
  }
  complete(id, led);
}

void ReplicatedStorage::fail_ledger(LedgerId id, Ledger& l, const Status& why) {
  if (l.failure.is_ok()) {
    MLOG_WARN("replicated storage: ledger {} can take no more adds: {}", id, why.to_string());
    l.failure = why;
  }
  std::deque<PendingAdd> pending;
  pending.swap(l.pending);
  for (PendingAdd& add : pending) deliver(add.home, [done = std::move(add.done), why]() { done(why); });
  if (l.closing && !l.changing) seal(id);
}

void ReplicatedStorage::publish_info(LedgerId id, const Ledger& l) {
  std::lock_guard lock(mu_);
  storage::LedgerInfo& info = info_[id];
  info.id = id;
  info.closed = l.meta.state == LedgerState::kClosed;
  info.last_confirmed = info.closed ? l.meta.last_entry : l.lac;
}

void ReplicatedStorage::publish_striping(LedgerId id, const Ledger& l) {
  std::optional<StripeInfo> stripe = l.writing ? stripe_info(l.meta, l.meta.fragments.size() - 1) : std::nullopt;
  std::lock_guard lock(mu_);
  if (!stripe) {
    striping_.erase(id);
    return;
  }
  striping_[id] = std::make_shared<const Striping>(Striping{std::move(*stripe), l.stripe_epoch});
}

std::optional<StripeInfo> ReplicatedStorage::stripe_info(const LedgerMeta& meta, size_t fragment, NodeId replaced,
                                                         NodeId target) {
  if (!meta.striped() || fragment >= meta.fragments.size()) return std::nullopt;
  StripeInfo info{meta.fragments[fragment].nodes, meta.write_quorum};
  if (info.ensemble.size() <= static_cast<size_t>(meta.write_quorum)) return std::nullopt;
  if (replaced != 0) std::replace(info.ensemble.begin(), info.ensemble.end(), replaced, target);
  return info;
}

void ReplicatedStorage::forget(LedgerId id) {
  ledgers_.erase(id);
  std::lock_guard lock(mu_);
  info_.erase(id);
  fsync_.erase(id);
  striping_.erase(id);
}

void ReplicatedStorage::keep_for_reads(LedgerId id) {
  cached_order_.push_back(id);
  while (cached_order_.size() > std::max<size_t>(settings_.max_cached_records, 1)) {
    const LedgerId old = cached_order_.front();
    cached_order_.pop_front();
    auto o = ledgers_.find(old);
    if (o == ledgers_.end() || o->second.writing || !o->second.closers.empty()) continue;
    ledgers_.erase(o);
    std::lock_guard lock(mu_);
    info_.erase(old);
    fsync_.erase(old);
    striping_.erase(old);
  }
}

void ReplicatedStorage::with_record(LedgerId id, std::function<void(Result<Ledger*>)> then) {
  auto it = ledgers_.find(id);
  if (it != ledgers_.end()) return then(&it->second);
  store_.get(ledger_key(id), [this, id, then](Result<metadata::Record> rec) {
    if (!rec) {
      if (rec.status().code() == ErrorCode::kNotFound) local_only_.insert(id);
      return then(rec.status());
    }
    auto meta = decode_ledger_meta(rec->value);
    if (!meta) return then(meta.status());
    auto found = ledgers_.find(id);
    if (found != ledgers_.end()) return then(&found->second);  // fetched twice at once
    Ledger& l = ledgers_[id];
    l.meta = std::move(meta.value());
    l.version = rec->stat.version;
    keep_for_reads(id);
    then(&l);
  });
}

void ReplicatedStorage::close_ledger(LedgerId id, Callback<Result<EntryId>> done) {
  Reactor* home = Reactor::current();
  run([this, id, home, done]() {
    if (local_only_.count(id) != 0) {
      return local_.close_ledger(id, [this, home, done](Result<EntryId> r) { deliver(home, [done, r]() { done(r); }); });
    }
    with_record(id, [this, id, home, done](Result<Ledger*> found) {
      if (!found) {
        if (found.status().code() == ErrorCode::kNotFound) {
          return local_.close_ledger(id, [this, home, done](Result<EntryId> r) { deliver(home, [done, r]() { done(r); }); });
        }
        Status st = found.status();
        return deliver(home, [done, st]() { done(st); });
      }
      Ledger& l = **found;
      if (l.meta.state == LedgerState::kClosed) {
        const EntryId last = l.meta.last_entry;
        return deliver(home, [done, last]() { done(last); });
      }
      l.closers.emplace_back(home, done);
      if (l.writing) {
        l.closing = true;
        if (l.pending.empty() && !l.changing) seal(id);
        return;
      }
      if (l.closers.size() == 1) recover(id);
    });
  });
}

// The writer's close: the record says closed at the LAC.
void ReplicatedStorage::seal(LedgerId id) {
  auto it = ledgers_.find(id);
  if (it == ledgers_.end()) return;
  Ledger& l = it->second;
  if (l.changing) return;
  LedgerMeta next = l.meta;
  next.state = LedgerState::kClosed;
  next.last_entry = l.lac;
  l.changing = true;  // no second seal while this one is written
  write_record(id, l.version, std::move(next), 0, [this, id](Result<metadata::Stat> put, LedgerMeta sealed) {
    auto found = ledgers_.find(id);
    if (found == ledgers_.end()) return;
    Ledger& led = found->second;
    led.changing = false;
    std::vector<CloseDone> closers;
    closers.swap(led.closers);
    if (put) {
      led.meta = sealed;
      led.version = put->version;
      led.writing = false;
      led.closing = false;
      publish_info(id, led);
      publish_striping(id, led);
      // Sealed, it is read like any other: its record leaves memory in turn.
      keep_for_reads(id);
      for (CloseDone& c : closers) deliver(c.first, [done = c.second, last = sealed.last_entry]() { done(last); });
      return;
    }
    // Someone recovered it meanwhile: its record says where it ends.
    MLOG_WARN("replicated storage: closing ledger {}: {}; reading its record", id, put.status().to_string());
    led.writing = false;
    ledgers_.erase(found);
    with_record(id, [this, closers](Result<Ledger*> now) {
      for (const CloseDone& c : closers) {
        Status st = !now ? now.status()
                    : (*now)->meta.state == LedgerState::kClosed
                        ? Status::ok()
                        : Status::fenced("the ledger is being recovered by another owner");
        const EntryId last = st.is_ok() ? (*now)->meta.last_entry : storage::kNoEntry;
        deliver(c.first, [done = c.second, st, last]() {
          if (st.is_ok()) return done(last);
          done(st);
        });
      }
    });
  });
}

void ReplicatedStorage::read_entries(LedgerId id, EntryId first, EntryId last,
                                     Callback<Result<std::vector<storage::Entry>>> done) {
  Reactor* home = Reactor::current();
  run([this, id, first, last, home, done]() {
    if (local_only_.count(id) != 0) {
      return local_.read_entries(id, first, last, [this, home, done](Result<std::vector<storage::Entry>> r) {
        deliver(home, [done, r = std::move(r)]() mutable { done(std::move(r)); });
      });
    }
    with_record(id, [this, id, first, last, home, done](Result<Ledger*> found) {
      if (!found) {
        if (found.status().code() == ErrorCode::kNotFound) {
          return local_.read_entries(id, first, last, [this, home, done](Result<std::vector<storage::Entry>> r) {
            deliver(home, [done, r = std::move(r)]() mutable { done(std::move(r)); });
          });
        }
        Status st = found.status();
        return deliver(home, [done, st]() { done(st); });
      }
      const LedgerMeta& meta = (*found)->meta;
      read_from(id, meta, first, last, 0, home, done);
    });
  });
}

void ReplicatedStorage::read_from(LedgerId id, const LedgerMeta& meta, EntryId first, EntryId last, size_t node_index,
                                  Reactor* home, Callback<Result<std::vector<storage::Entry>>> done,
                                  uint32_t max_bytes) {
  size_t fi = meta.fragments.size() - 1;
  while (fi > 0 && meta.fragments[fi].first_entry > first) --fi;
  const EntryId end = std::min(last, meta.fragment_end(fi, last));
  if (meta.fragments[fi].nodes.size() > static_cast<size_t>(meta.write_quorum)) {
    return read_striped(id, meta, fi, first, end, home, std::move(done), max_bytes);
  }
  // This node first, then the others in their order.
  std::vector<NodeId> order = meta.fragments[fi].nodes;
  auto self = std::find(order.begin(), order.end(), transport_.self());
  if (self != order.end()) std::rotate(order.begin(), self, self + 1);
  if (node_index >= order.size()) {
    return deliver(home, [done, id, first]() {
      done(Status::unavailable("ledger " + std::to_string(id) + ": no storage node could return entry " +
                               std::to_string(first)));
    });
  }
  const NodeId node = order[node_index];
  transport_.call(
      node, StorageMethod::kRead, encode_read(id, first, end, max_bytes),
      [this, id, meta, first, last, node_index, home, done, max_bytes](Result<std::string> reply) {
        if (reply) {
          const auto* rr = cluster::verified_record<fb::ReadReply>(*reply);
          if (rr != nullptr && rr->code() == 0 && rr->entries() != nullptr && rr->entries()->size() > 0 &&
              rr->entries()->Get(0)->entry() == first) {
            ReadBytes read;
            read.reserve(rr->entries()->size());
            for (const fb::StoredEntry* e : *rr->entries()) {
              if (e->entry() != first + static_cast<EntryId>(read.size()) || e->data() == nullptr) break;
              read.emplace_back(e->entry(), e->data());
            }
            return deliver(home, [done, entries = one_buffer(id, read)]() mutable { done(std::move(entries)); });
          }
          if (rr == nullptr) {
            MLOG_WARN("replicated storage: malformed read answer for ledger {}", id);
          } else if (rr->code() != 0) {
            MLOG_WARN("replicated storage: reading ledger {} entry {}: {}", id, first,
                      reply_status(rr->code(), rr->message()).to_string());
          }
        }
        read_from(id, meta, first, last, node_index + 1, home, done, max_bytes);
      },
      settings_.read_timeout_ms);
}

void ReplicatedStorage::read_striped(LedgerId id, const LedgerMeta& meta, size_t fragment, EntryId first,
                                     EntryId last, Reactor* home,
                                     Callback<Result<std::vector<storage::Entry>>> done, uint32_t max_bytes) {
  struct Gather {
    size_t left = 0;
    std::vector<std::string> replies;
  };
  auto g = std::make_shared<Gather>();
  // A node known to be gone is not waited for: the others hold its entries too.
  const std::vector<NodeId> live = transport_.live_storage_nodes();
  std::vector<NodeId> asked;
  for (NodeId n : meta.fragments[fragment].nodes) {
    if (std::find(live.begin(), live.end(), n) != live.end()) asked.push_back(n);
  }
  auto none = [id, first]() {
    return Status::unavailable("ledger " + std::to_string(id) + ": no storage node could return entry " +
                               std::to_string(first));
  };
  if (asked.empty()) return deliver(home, [done, st = none()]() { done(st); });
  g->left = asked.size();
  for (NodeId node : asked) {
    transport_.call(
        node, StorageMethod::kRead, encode_read(id, first, last, max_bytes),
        [this, g, id, first, last, home, done, none](Result<std::string> reply) {
          if (reply) g->replies.push_back(std::move(reply.value()));
          if (--g->left > 0) return;
          std::map<EntryId, const flatbuffers::Vector<uint8_t>*> found;
          for (const std::string& bytes : g->replies) {
            const auto* rr = cluster::verified_record<fb::ReadReply>(bytes);
            if (rr == nullptr || rr->code() != 0 || rr->entries() == nullptr) continue;
            for (const fb::StoredEntry* e : *rr->entries()) {
              if (e->data() == nullptr || e->entry() < first || e->entry() > last) continue;
              found.emplace(e->entry(), e->data());
            }
          }
          // As far as the answers hold every entry.
          ReadBytes read;
          for (auto it = found.begin(); it != found.end() && it->first == first + static_cast<EntryId>(read.size());
               ++it) {
            read.emplace_back(it->first, it->second);
          }
          if (read.empty()) return deliver(home, [done, st = none()]() { done(st); });
          deliver(home, [done, entries = one_buffer(id, read)]() mutable { done(std::move(entries)); });
        },
        settings_.read_timeout_ms);
  }
}

void ReplicatedStorage::delete_ledger(LedgerId id, Callback<Status> done) {
  Reactor* home = Reactor::current();
  run([this, id, home, done]() {
    with_record(id, [this, id, home, done](Result<Ledger*> found) {
      if (!found) {
        if (found.status().code() == ErrorCode::kNotFound) {
          local_only_.erase(id);
          return local_.delete_ledger(id, [this, home, done](Status st) { deliver(home, [done, st]() { done(st); }); });
        }
        Status st = found.status();
        return deliver(home, [done, st]() { done(st); });
      }
      const std::vector<NodeId> nodes = (*found)->meta.all_nodes();
      store_.del(ledger_key(id), metadata::kAnyVersion, [this, id, nodes, home, done](Status st) {
        if (!st.is_ok() && st.code() != ErrorCode::kNotFound) return deliver(home, [done, st]() { done(st); });
        forget(id);
        // The copies go on their own; a node that misses this keeps an
        // orphan copy until it is told again.
        for (NodeId node : nodes) {
          transport_.call(
              node, StorageMethod::kDelete, encode_delete(id),
              [id, node](Result<std::string> reply) {
                Status outcome = reply ? decode_outcome(*reply) : reply.status();
                if (!outcome.is_ok()) {
                  MLOG_WARN("replicated storage: storage node {} did not delete its copy of ledger {}: {}", node, id,
                            outcome.to_string());
                }
              },
              settings_.read_timeout_ms);
        }
        deliver(home, [done]() { done(Status::ok()); });
      });
    });
  });
}

Result<storage::LedgerInfo> ReplicatedStorage::ledger_info(LedgerId id) const {
  {
    std::lock_guard lock(mu_);
    auto it = info_.find(id);
    if (it != info_.end()) return it->second;
  }
  return local_.ledger_info(id);
}

std::vector<LedgerId> ReplicatedStorage::list_ledgers() const {
  std::vector<LedgerId> out = local_.list_ledgers();
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, info] : info_) out.push_back(id);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace magnetar::replication
