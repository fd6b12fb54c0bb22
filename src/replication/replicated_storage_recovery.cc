// ReplicatedStorage: a new owner recovering a ledger (fence, read forward, close).
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

// One recovery of a ledger this node does not write.
struct ReplicatedStorage::Recovery {
  LedgerId id = 0;
  LedgerMeta meta;
  int64_t version = 0;
  std::vector<CloseDone> waiters;
  EntryId start = 0;  // the first entry read forward (the highest LAC + 1)
  // Fenced nodes of the last fragment whose copy ended before the LAC (a
  // node that fell behind): {node, its last entry}.
  std::vector<std::pair<NodeId, EntryId>> lagging;
};

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
                 std::vector<std::pair<NodeId, EntryId>> last_held;
               };
               auto f = std::make_shared<Fencing>();
               const size_t total = last.nodes.size();
               for (NodeId node : last.nodes) {
                 transport_.call(
                     node, StorageMethod::kFence, encode_fence(r->id, true),
                     [this, r, f, total, node](Result<std::string> reply) {
                       f->answered++;
                       if (reply) {
                         const auto* fr = cluster::verified_record<fb::FenceReply>(*reply);
                         if (fr != nullptr && fr->code() == 0) {
                           f->fenced++;
                           f->lac = std::max<EntryId>(f->lac, fr->lac());
                           f->last_held.emplace_back(node, fr->held() ? fr->last_held() : storage::kNoEntry);
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
                       r->start = start;
                       for (const auto& [n, last] : f->last_held) {
                         if (last < start - 1) r->lagging.emplace_back(n, last);
                       }
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
    bool acted = false;  // found, or ruled out: the answers still to come change nothing
    std::optional<std::string> data;
  };
  auto p = std::make_shared<Probe>();
  const std::vector<NodeId> set = r->meta.write_set(entry);
  // Enough nodes without the entry that no ack quorum can have held it.
  const size_t absent_needed = set.size() - static_cast<size_t>(r->meta.ack_quorum) + 1;
  for (NodeId node : set) {
    transport_.call(
        node, StorageMethod::kRead, encode_read(r->id, entry, entry),
        [this, r, p, entry, set, absent_needed](Result<std::string> reply) {
          p->answered++;
          if (p->acted) return;
          if (reply) {
            const auto* rr = cluster::verified_record<fb::ReadReply>(*reply);
            if (rr != nullptr && rr->code() == 0) {
              const auto* entries = rr->entries();
              if (entries != nullptr && entries->size() > 0 && entries->Get(0)->entry() == entry &&
                  entries->Get(0)->data() != nullptr) {
                const auto* d = entries->Get(0)->data();
                p->data.emplace(reinterpret_cast<const char*>(d->data()), d->size());
              } else if (!rr->held() || rr->last_held() < entry) {
                p->absent++;
              }
            }
          }
          // A node that returns the entry settles it at once (a silent node
          // costs no read timeout); so do enough "absent" answers.
          if (!p->data && p->absent < absent_needed && p->answered < set.size()) return;
          p->acted = true;
          if (!p->data) {
            if (p->absent >= absent_needed) {
              r->meta.last_entry = entry - 1;
              return finish_recovery(r, Status::ok());
            }
            return finish_recovery(r, Status::unavailable("ledger " + std::to_string(r->id) + ": entry " +
                                                          std::to_string(entry) +
                                                          " could not be found or ruled out; too few storage nodes"));
          }
          // Found: written again to its whole write set, going on once an ack
          // quorum stored it. A copy that fell behind keeps it as a run of its
          // own (new_run) rather than refuse the gap: the entries it lacks are
          // up to the LAC, which an ack quorum holds.
          const std::optional<StripeInfo> stripe = stripe_info(r->meta, r->meta.fragments.size() - 1);
          std::string payload =
              encode_add(r->id, entry, entry - 1, true, 255, 0, reinterpret_cast<const uint8_t*>(p->data->data()),
                         p->data->size(), /*new_run=*/true, stripe ? &*stripe : nullptr);
          struct Written {
            size_t answered = 0;
            size_t stored = 0;
            bool acted = false;
            std::vector<NodeId> refused;  // nodes that failed the add
          };
          auto written = std::make_shared<Written>();
          for (NodeId node : set) {
            transport_.call(
                node, StorageMethod::kAdd, payload,
                [this, r, entry, written, set, node](Result<std::string> added) {
                  written->answered++;
                  if (written->acted) return;
                  if (added && decode_outcome(*added).is_ok()) {
                    written->stored++;
                  } else {
                    written->refused.push_back(node);
                  }
                  if (static_cast<int>(written->stored) >= r->meta.ack_quorum) {
                    written->acted = true;
                    recovered_entries_.inc();
                    return recover_entry(r, entry + 1);
                  }
                  if (written->answered < set.size()) return;
                  written->acted = true;
                  // Short of the ack quorum only because nodes of its write set
                  // are gone (a striped write set of two with one lost): the
                  // entry is kept on every live one, as it was, and the ledger
                  // closes under-replicated for self-healing to mend, rather
                  // than stay unreadable until the lost node returns.
                  const std::vector<NodeId> live = transport_.live_storage_nodes();
                  const bool only_gone = written->stored > 0 &&
                                         std::none_of(written->refused.begin(), written->refused.end(),
                                                      [&live](NodeId n) {
                                                        return std::find(live.begin(), live.end(), n) != live.end();
                                                      });
                  if (only_gone) {
                    MLOG_WARN("replicated storage: ledger {} entry {} recovered onto {} storage node(s), fewer than "
                              "its ack quorum: the others of its write set are gone",
                              r->id, entry, written->stored);
                    recovered_entries_.inc();
                    return recover_entry(r, entry + 1);
                  }
                  finish_recovery(r, Status::unavailable("ledger " + std::to_string(r->id) +
                                                         ": a recovered entry reached too few storage nodes"));
                },
                settings_.add_timeout_ms);
          }
        },
        settings_.read_timeout_ms);
  }
}

// A copy that fell behind its write quorum before the old writer stopped
// lacks entries up to the LAC, and the recovery may have given it the
// entries past the LAC as a run of their own: the record names it for
// every entry of the fragment, so what it lacks is copied to it now, as
// healing copies, in the background (the topic does not wait).
void ReplicatedStorage::fill_lagging(const std::shared_ptr<Recovery>& r) {
  const Fragment& last = r->meta.fragments.back();
  for (const auto& [node, held] : r->lagging) {
    const EntryId from = std::max(held + 1, last.first_entry);
    const EntryId to = std::min(r->start - 1, r->meta.last_entry);
    if (from > to) continue;
    MLOG_INFO("replicated storage: ledger {}: storage node {} fell behind; copying it entries {}..{}", r->id, node,
              from, to);
    fill_copy(r->id, r->meta, node, from, from, to);
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
             [this, r, closed, answer](Result<metadata::Stat> put) {
               if (!put) return answer(put.status());
               r->meta = closed;
               r->version = put->version;
               MLOG_INFO("replicated storage: ledger {} recovered and closed at entry {}", r->id, closed.last_entry);
               answer(closed.last_entry);
               fill_lagging(r);
             });
}


}  // namespace magnetar::replication
