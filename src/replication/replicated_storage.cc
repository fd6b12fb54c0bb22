#include "replication/replicated_storage.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <utility>

#include "cluster/rpc_records.h"
#include "common/clock.h"
#include "common/logging.h"
#include "replication/placement.h"
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

std::string add_payload(LedgerId ledger, EntryId entry, EntryId lac, bool recovery, uint8_t fsync,
                        uint32_t interval_ms, const uint8_t* data, size_t size) {
  flatbuffers::FlatBufferBuilder b(size + 96);
  auto bytes = b.CreateVector(data, size);
  b.Finish(fb::CreateAddEntry(b, 1, ledger, entry, lac, recovery, fsync, interval_ms, bytes));
  return cluster::record_bytes(b);
}

std::string read_payload(LedgerId ledger, EntryId first, EntryId last) {
  flatbuffers::FlatBufferBuilder b(64);
  b.Finish(fb::CreateReadEntries(b, 1, ledger, first, last, 0));
  return cluster::record_bytes(b);
}

std::string fence_payload(LedgerId ledger, bool fence) {
  flatbuffers::FlatBufferBuilder b(32);
  b.Finish(fb::CreateFence(b, 1, ledger, fence));
  return cluster::record_bytes(b);
}

std::string delete_payload(LedgerId ledger) {
  flatbuffers::FlatBufferBuilder b(32);
  b.Finish(fb::CreateDeleteReplica(b, 1, ledger));
  return cluster::record_bytes(b);
}

Status reply_status(uint8_t code, const flatbuffers::String* message) {
  if (code == 0) return Status::ok();
  return Status(static_cast<ErrorCode>(code), message ? message->str() : "");
}

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// One recovery of a ledger this node does not write.
struct ReplicatedStorage::Recovery {
  LedgerId id = 0;
  LedgerMeta meta;
  int64_t version = 0;
  std::vector<CloseDone> waiters;
};

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
    if (settings_.heal_interval.count() > 0) {
      heal_timer_ = std::make_unique<runtime::Timer>(transport_.reactor());
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
    std::vector<NodeId> live = placeable(transport_.live_storage_nodes());
    const int n = static_cast<int>(live.size());
    int ensemble = options.ensemble > 0 ? options.ensemble : std::min(settings_.max_ensemble, n);
    int write_quorum = options.write_quorum > 0 ? options.write_quorum : ensemble;
    int ack_quorum = options.ack_quorum > 0 ? options.ack_quorum : std::min(settings_.max_ack_quorum, write_quorum);
    // Every node of an ensemble holds every entry of its fragments (no striping yet).
    ensemble = std::min(ensemble, write_quorum);
    write_quorum = ensemble;
    ack_quorum = std::min(ack_quorum, write_quorum);
    if (n < ack_quorum || ack_quorum < 1) {
      return answer(Status::unavailable("ledger " + std::to_string(id) + " needs " + std::to_string(ack_quorum) +
                                        " storage nodes and " + std::to_string(n) + " are live"));
    }
    if (n < ensemble) {
      MLOG_WARN("replicated storage: ledger {} gets {} copies of the {} asked for: {} storage nodes are live", id, n,
                ensemble, n);
      ensemble = n;
      write_quorum = n;
    }
    // This node first (its reads stay local), the others at random, spread across zones.
    static thread_local std::mt19937_64 rng(std::random_device{}());
    std::shuffle(live.begin(), live.end(), rng);
    auto self = std::find(live.begin(), live.end(), transport_.self());
    if (self != live.end()) std::iter_swap(live.begin(), self);
    live = choose_nodes(live, {}, static_cast<size_t>(ensemble), [this](NodeId node) { return zone_of(node); });
    LedgerMeta meta;
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
  {
    std::lock_guard lock(mu_);
    auto info = info_.find(id);
    if (info != info_.end()) {
      replicated = true;
      lac = info->second.last_confirmed;
      auto f = fsync_.find(id);
      if (f != fsync_.end()) fsync = f->second;
    }
  }
  if (!replicated) return local_.add_entry(writer, entry, std::move(data), std::move(done));
  // Encoded here, on the caller's thread, not on the cluster reactor.
  std::string payload = add_payload(id, entry, lac, false, fsync.mode, fsync.interval_ms, data.data(), data.size());
  run([this, writer, entry, payload = std::move(payload), home, done]() mutable {
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
    l.pending.push_back(PendingAdd{entry, std::move(payload), {}, done, home});
    if (l.changing) return;  // sent once the new ensemble is recorded
    PendingAdd& add = l.pending.back();
    for (NodeId node : l.meta.write_set(entry)) {
      if (l.failed.count(node) == 0) send(writer.ledger, l, add, node);
    }
  });
}

void ReplicatedStorage::send(LedgerId id, Ledger& l, PendingAdd& add, NodeId node) {
  (void)l;
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
  if (spare.empty()) {
    size_t left = 0;
    for (NodeId n : current.nodes) left += l.failed.count(n) == 0 ? 1 : 0;
    if (static_cast<int>(left) < l.meta.ack_quorum) {
      return fail_ledger(id, l, Status::unavailable("ledger " + std::to_string(id) + ": fewer than " +
                                                    std::to_string(l.meta.ack_quorum) + " storage nodes left"));
    }
    degraded_adds_.inc();
    MLOG_WARN("replicated storage: no storage node to replace {} in ledger {}; going on with {} copies", node, id,
              left);
    return complete(id, l);
  }
  static thread_local std::mt19937_64 rng(std::random_device{}());
  std::shuffle(spare.begin(), spare.end(), rng);
  std::vector<NodeId> kept;
  for (NodeId n : current.nodes) {
    if (l.failed.count(n) == 0) kept.push_back(n);
  }
  const NodeId replacement = choose_nodes(spare, kept, 1, [this](NodeId n) { return zone_of(n); }).front();
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

void ReplicatedStorage::change_ensemble(LedgerId id, Ledger& l, LedgerMeta next, NodeId old, NodeId replacement) {
  l.changing = true;
  store_.put(ledger_key(id), encode_ledger_meta(next), metadata::PutOptions{l.version, 0},
             [this, id, next, old, replacement](Result<metadata::Stat> put) {
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

void ReplicatedStorage::forget(LedgerId id) {
  ledgers_.erase(id);
  std::lock_guard lock(mu_);
  info_.erase(id);
  fsync_.erase(id);
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
  store_.put(ledger_key(id), encode_ledger_meta(next), metadata::PutOptions{l.version, 0},
             [this, id, next](Result<metadata::Stat> put) {
               auto found = ledgers_.find(id);
               if (found == ledgers_.end()) return;
               Ledger& led = found->second;
               led.changing = false;
               std::vector<CloseDone> closers;
               closers.swap(led.closers);
               if (put) {
                 led.meta = next;
                 led.version = put->version;
                 led.writing = false;
                 led.closing = false;
                 publish_info(id, led);
                 // Sealed, it is read like any other: its record leaves memory in turn.
                 keep_for_reads(id);
                 for (CloseDone& c : closers) deliver(c.first, [done = c.second, last = next.last_entry]() { done(last); });
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
                                   : Status::unavailable("the ledger is being recovered by another owner");
                   const EntryId last = st.is_ok() ? (*now)->meta.last_entry : storage::kNoEntry;
                   deliver(c.first, [done = c.second, st, last]() {
                     if (st.is_ok()) return done(last);
                     done(st);
                   });
                 }
               });
             });
}

void ReplicatedStorage::recover(LedgerId id) {
  auto r = std::make_shared<Recovery>();
  r->id = id;
  Ledger& l = ledgers_[id];
  r->meta = l.meta;
  r->version = l.version;
  recoveries_.inc();
  MLOG_INFO("replicated storage: recovering ledger {} (written by node {})", id, l.meta.writer);
  // Recovering first: the old writer's ensemble changes fail from here on.
  LedgerMeta marked = r->meta;
  marked.state = LedgerState::kRecovering;
  store_.put(ledger_key(id), encode_ledger_meta(marked), metadata::PutOptions{r->version, 0},
             [this, r, marked](Result<metadata::Stat> put) {
               if (!put) return finish_recovery(r, put.status());
               r->meta = marked;
               r->version = put->version;
               const Fragment& last = r->meta.fragments.back();
               struct Fencing {
                 size_t answered = 0;
                 size_t fenced = 0;
                 EntryId lac = storage::kNoEntry;
               };
               auto f = std::make_shared<Fencing>();
               const size_t total = last.nodes.size();
               for (NodeId node : last.nodes) {
                 transport_.call(
                     node, StorageMethod::kFence, fence_payload(r->id, true),
                     [this, r, f, total](Result<std::string> reply) {
                       f->answered++;
                       if (reply) {
                         const auto* fr = cluster::verified_record<fb::FenceReply>(*reply);
                         if (fr != nullptr && fr->code() == 0) {
                           f->fenced++;
                           f->lac = std::max<EntryId>(f->lac, fr->lac());
                         }
                       }
                       if (f->answered < total) return;
                       // No ack quorum may be left unfenced.
                       const size_t needed = total - static_cast<size_t>(r->meta.ack_quorum) + 1;
                       if (f->fenced < needed) {
                         return finish_recovery(r, Status::unavailable(
                                                       "ledger " + std::to_string(r->id) + ": fenced " +
                                                       std::to_string(f->fenced) + " of the " +
                                                       std::to_string(needed) + " storage nodes needed"));
                       }
                       const EntryId start = std::max(f->lac, r->meta.fragments.back().first_entry - 1) + 1;
                       recover_entry(r, start);
                     },
                     settings_.add_timeout_ms);
               }
             });
}

void ReplicatedStorage::recover_entry(const std::shared_ptr<Recovery>& r, EntryId entry) {
  struct Probe {
    size_t answered = 0;
    size_t absent = 0;
    std::optional<std::string> data;
  };
  auto p = std::make_shared<Probe>();
  const std::vector<NodeId> set = r->meta.write_set(entry);
  for (NodeId node : set) {
    transport_.call(
        node, StorageMethod::kRead, read_payload(r->id, entry, entry),
        [this, r, p, entry, set](Result<std::string> reply) {
          p->answered++;
          if (reply) {
            const auto* rr = cluster::verified_record<fb::ReadReply>(*reply);
            if (rr != nullptr && rr->code() == 0) {
              const auto* entries = rr->entries();
              if (entries != nullptr && entries->size() > 0 && entries->Get(0)->entry() == entry &&
                  entries->Get(0)->data() != nullptr) {
                if (!p->data) {
                  const auto* d = entries->Get(0)->data();
                  p->data.emplace(reinterpret_cast<const char*>(d->data()), d->size());
                }
              } else if (!rr->held() || rr->last_held() < entry) {
                p->absent++;
              }
            }
          }
          if (p->answered < set.size()) return;
          if (!p->data) {
            const size_t absent_needed = set.size() - static_cast<size_t>(r->meta.ack_quorum) + 1;
            if (p->absent >= absent_needed) {
              r->meta.last_entry = entry - 1;
              return finish_recovery(r, Status::ok());
            }
            return finish_recovery(r, Status::unavailable("ledger " + std::to_string(r->id) + ": entry " +
                                                          std::to_string(entry) +
                                                          " could not be found or ruled out; too few storage nodes"));
          }
          // Found: written again to its whole write set before going on.
          std::string payload = add_payload(r->id, entry, entry - 1, true, 255, 0,
                                            reinterpret_cast<const uint8_t*>(p->data->data()), p->data->size());
          auto written = std::make_shared<std::pair<size_t, size_t>>(0, 0);  // answered, stored
          for (NodeId node : set) {
            transport_.call(
                node, StorageMethod::kAdd, payload,
                [this, r, entry, written, set](Result<std::string> added) {
                  written->first++;
                  if (added && decode_outcome(*added).is_ok()) written->second++;
                  if (written->first < set.size()) return;
                  if (static_cast<int>(written->second) < r->meta.ack_quorum) {
                    return finish_recovery(r, Status::unavailable("ledger " + std::to_string(r->id) +
                                                                  ": a recovered entry reached too few storage nodes"));
                  }
                  recovered_entries_.inc();
                  recover_entry(r, entry + 1);
                },
                settings_.add_timeout_ms);
          }
        },
        settings_.read_timeout_ms);
  }
}

void ReplicatedStorage::finish_recovery(const std::shared_ptr<Recovery>& r, Status st) {
  auto answer = [this, r](Result<EntryId> outcome) {
    auto it = ledgers_.find(r->id);
    if (it == ledgers_.end()) return;
    std::vector<CloseDone> closers;
    closers.swap(it->second.closers);
    if (outcome) {
      it->second.meta = r->meta;
      it->second.version = r->version;
      publish_info(r->id, it->second);
    } else {
      ledgers_.erase(it);  // read again by the next attempt
    }
    for (CloseDone& c : closers) deliver(c.first, [done = c.second, outcome]() { done(outcome); });
  };
  if (!st.is_ok()) {
    MLOG_WARN("replicated storage: recovery of ledger {} failed: {}", r->id, st.to_string());
    return answer(st);
  }
  LedgerMeta closed = r->meta;
  closed.state = LedgerState::kClosed;
  store_.put(ledger_key(r->id), encode_ledger_meta(closed), metadata::PutOptions{r->version, 0},
             [r, closed, answer](Result<metadata::Stat> put) {
               if (!put) return answer(put.status());
               r->meta = closed;
               r->version = put->version;
               MLOG_INFO("replicated storage: ledger {} recovered and closed at entry {}", r->id, closed.last_entry);
               answer(closed.last_entry);
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
                                  Reactor* home, Callback<Result<std::vector<storage::Entry>>> done) {
  size_t fi = meta.fragments.size() - 1;
  while (fi > 0 && meta.fragments[fi].first_entry > first) --fi;
  const EntryId end = std::min(last, meta.fragment_end(fi, last));
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
      node, StorageMethod::kRead, read_payload(id, first, end),
      [this, id, meta, first, last, node_index, home, done](Result<std::string> reply) {
        if (reply) {
          const auto* rr = cluster::verified_record<fb::ReadReply>(*reply);
          if (rr != nullptr && rr->code() == 0 && rr->entries() != nullptr && rr->entries()->size() > 0 &&
              rr->entries()->Get(0)->entry() == first) {
            // One buffer for the batch; each entry a slice of it.
            size_t total = 0;
            size_t count = 0;
            EntryId expect = first;
            for (const fb::StoredEntry* e : *rr->entries()) {
              if (e->entry() != expect || e->data() == nullptr) break;
              total += e->data()->size();
              ++count;
              ++expect;
            }
            Slice buffer = Slice::allocate(std::max<size_t>(total, 1));
            std::vector<storage::Entry> entries;
            entries.reserve(count);
            size_t at = 0;
            for (size_t k = 0; k < count; ++k) {
              const fb::StoredEntry* e = rr->entries()->Get(static_cast<flatbuffers::uoffset_t>(k));
              const size_t n = e->data()->size();
              if (n > 0) std::memcpy(buffer.mutable_data() + at, e->data()->data(), n);
              entries.push_back(storage::Entry{id, e->entry(), buffer.sub(at, n)});
              at += n;
            }
            return deliver(home, [done, entries = std::move(entries)]() mutable { done(std::move(entries)); });
          }
          if (rr == nullptr) {
            MLOG_WARN("replicated storage: malformed read answer for ledger {}", id);
          } else if (rr->code() != 0) {
            MLOG_WARN("replicated storage: reading ledger {} entry {}: {}", id, first,
                      reply_status(rr->code(), rr->message()).to_string());
          }
        }
        read_from(id, meta, first, last, node_index + 1, home, done);
      },
      settings_.read_timeout_ms);
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
              node, StorageMethod::kDelete, delete_payload(id),
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
    MLOG_INFO("replicated storage: storage nodes being decommissioned: {}", draining_copy_.size());
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
  static thread_local std::mt19937_64 rng(std::random_device{}());
  const std::vector<NodeId> holding = l.meta.all_nodes();
  const std::vector<NodeId> live = placeable(transport_.live_storage_nodes());
  std::vector<NodeId> fresh;  // hold no part of the ledger: can take the fragment's copy whole
  std::vector<NodeId> other;  // not in the last fragment: can take its new entries
  for (NodeId n : live) {
    if (l.failed.count(n) != 0) continue;
    if (std::find(holding.begin(), holding.end(), n) == holding.end()) fresh.push_back(n);
    if (std::find(last.nodes.begin(), last.nodes.end(), n) == last.nodes.end()) other.push_back(n);
  }
  std::shuffle(fresh.begin(), fresh.end(), rng);
  std::shuffle(other.begin(), other.end(), rng);
  auto zone = [this](NodeId n) { return zone_of(n); };
  if (!fresh.empty()) {
    const NodeId target = choose_nodes(fresh, staying, 1, zone).front();
    MLOG_INFO("replicated storage: moving ledger {}'s copy from entry {} off storage node {} (decommissioned) to {}",
              id, last.first_entry, leaving, target);
    l.moving = true;
    return move_copy(id, leaving, target, last.first_entry, last.first_entry, 0);
  }
  if (other.empty()) return;  // nowhere to go: it stays, and the node is not drained
  // No node can hold the fragment whole: new entries avoid the draining
  // node, whose older entries stay until a node is free to take them.
  const NodeId replacement = choose_nodes(other, staying, 1, zone).front();
  LedgerMeta next = l.meta;
  Fragment fragment = last;
  std::replace(fragment.nodes.begin(), fragment.nodes.end(), leaving, replacement);
  fragment.first_entry = l.lac + 1;
  if (next.fragments.back().first_entry == fragment.first_entry) {
    next.fragments.back() = fragment;
  } else {
    next.fragments.push_back(fragment);
  }
  MLOG_INFO("replicated storage: ledger {}'s new entries avoid storage node {} (decommissioned)", id, leaving);
  change_ensemble(id, l, std::move(next), leaving, replacement);
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
              // One entry in flight at a time, as healing does; the closure holds itself weakly.
              auto step = std::make_shared<std::function<void(size_t)>>();
              std::weak_ptr<std::function<void(size_t)>> weak = step;
              *step = [this, id, leaving, target, first, lac, rounds, entries, weak](size_t k) {
                if (k == entries->size()) {
                  return move_copy(id, leaving, target, first, entries->back().id + 1, rounds + 1);
                }
                const storage::Entry& e = (*entries)[k];
                transport_.call(
                    target, StorageMethod::kAdd,
                    add_payload(id, e.id, lac, false, 255, 0, e.data.data(), e.data.size()),
                    [this, id, next = weak.lock(), k](Result<std::string> reply) {
                      Status st = reply ? decode_outcome(*reply) : reply.status();
                      if (!st.is_ok()) {
                        MLOG_WARN("replicated storage: moving ledger {}'s copy: the new node refused an entry: {}",
                                  id, st.to_string());
                        auto found = ledgers_.find(id);
                        if (found != ledgers_.end()) end_move(id, found->second);
                        return;
                      }
                      (*next)(k + 1);
                    },
                    settings_.add_timeout_ms);
              };
              (*step)(0);
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
    if (!stopped_) underreplicated_.set(static_cast<double>(h->underreplicated));
    healing_ = false;
    // A pass mends one fragment per ledger: while copies leave draining
    // nodes, the next pass follows at once.
    if (!stopped_ && h->healed > 0 && !draining_.empty()) run([this]() { heal_pass(); });
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
        const bool ready = leaving || now - gone_since_ms_.emplace(n, now).first->second >= settings_.heal_grace.count();
        // Only closed ledgers: an open one's record is its writer's to change.
        if (meta->state == LedgerState::kClosed && ready && !due) due = {i, n};
      }
    }
    if (!due) return heal_next(h);
    const std::vector<NodeId> holding = meta->all_nodes();
    std::vector<NodeId> spare;
    for (NodeId n : placeable(h->live)) {
      if (std::find(holding.begin(), holding.end(), n) == holding.end()) spare.push_back(n);
    }
    if (spare.empty()) return heal_next(h);  // nowhere to put a copy: it stays short
    static thread_local std::mt19937_64 rng(std::random_device{}());
    std::shuffle(spare.begin(), spare.end(), rng);
    const auto [fragment, gone] = *due;
    std::vector<NodeId> staying;
    for (NodeId n : meta->fragments[fragment].nodes) {
      if (n != gone) staying.push_back(n);
    }
    const NodeId target = choose_nodes(spare, staying, 1, [this](NodeId n) { return zone_of(n); }).front();
    const EntryId first = meta->fragments[fragment].first_entry;
    const EntryId end = meta->fragment_end(fragment, meta->last_entry);
    MLOG_INFO("replicated storage: healing ledger {} entries {}..{}: copying what storage node {} held to {}", id,
              first, end, gone, target);
    heal_copy(h, id, *meta, fragment, gone, target, first, end);
  });
}

void ReplicatedStorage::heal_copy(const std::shared_ptr<Healing>& h, LedgerId id, LedgerMeta meta, size_t fragment,
                                  NodeId gone, NodeId target, EntryId next, EntryId end) {
  if (stopped_) return heal_next(h);
  if (next > end) return heal_record(h, id, fragment, gone, target);
  read_from(id, meta, next, end, 0, nullptr,
            [this, h, id, meta, fragment, gone, target, end](Result<std::vector<storage::Entry>> got) {
              if (!got || got->empty()) {
                MLOG_WARN("replicated storage: healing ledger {}: cannot read its entries: {}", id,
                          got ? std::string("none returned") : got.status().to_string());
                return heal_next(h);
              }
              // One entry in flight at a time: the copying never crowds out producers.
              auto entries = std::make_shared<std::vector<storage::Entry>>(std::move(got.value()));
              // The closure holds itself weakly; the call in flight holds it.
              auto step = std::make_shared<std::function<void(size_t)>>();
              std::weak_ptr<std::function<void(size_t)>> weak = step;
              *step = [this, h, id, meta, fragment, gone, target, end, entries, weak](size_t k) {
                if (k == entries->size()) {
                  return heal_copy(h, id, meta, fragment, gone, target, entries->back().id + 1, end);
                }
                const storage::Entry& e = (*entries)[k];
                transport_.call(
                    target, StorageMethod::kAdd,
                    add_payload(id, e.id, meta.last_entry, true, 255, 0, e.data.data(), e.data.size()),
                    [this, h, id, next = weak.lock(), k](Result<std::string> reply) {
                      Status st = reply ? decode_outcome(*reply) : reply.status();
                      if (!st.is_ok()) {
                        MLOG_WARN("replicated storage: healing ledger {}: the new copy refused an entry: {}", id,
                                  st.to_string());
                        return heal_next(h);
                      }
                      healed_entries_.inc();
                      (*next)(k + 1);
                    },
                    settings_.add_timeout_ms);
              };
              (*step)(0);
            });
}

void ReplicatedStorage::heal_record(const std::shared_ptr<Healing>& h, LedgerId id, size_t fragment, NodeId gone,
                                    NodeId target) {
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

}  // namespace magnetar::replication
