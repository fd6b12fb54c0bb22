#include "ledger/ledger_reconciler.h"

#include <pthread.h>

#include <algorithm>
#include <future>
#include <string>
#include <vector>

#include "common/logging.h"
#include "ledger/ledger_ids.h"
#include "ledger/managed_ledger.h"
#include "metadata/blocking.h"

namespace magnetar::ledger {

namespace md = metadata::blocking;
using common::Result;
using common::Status;
using storage::LedgerId;

namespace {

constexpr const char* kRoot = "/managed-ledgers";
// The levels of a ledger list's key under kRoot: tenant, namespace, domain, topic.
constexpr int kKeyDepth = 4;

// Deletes `id` from storage and waits for the answer.
Status delete_and_wait(storage::Storage& storage, LedgerId id) {
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  storage.delete_ledger(id, [promise](Status st) { promise->set_value(std::move(st)); });
  if (future.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    return Status::unavailable("storage did not answer the deletion of ledger " + std::to_string(id));
  }
  return future.get();
}

}  // namespace

LedgerReconciler::LedgerReconciler(storage::Storage& storage, metadata::Store& store,
                                   std::chrono::milliseconds interval)
    : storage_(storage),
      store_(store),
      interval_(interval),
      deleted_(common::MetricsRegistry::global().counter(
          "magnetar_storage_orphan_ledgers_deleted_total",
          "Storage ledgers no topic's ledger list named (left by a crash), deleted by the reconciler")),
      missing_(common::MetricsRegistry::global().gauge(
          "magnetar_storage_missing_ledgers",
          "Ledgers a topic's ledger list names that storage does not have, at the last reconcile pass")) {}

LedgerReconciler::~LedgerReconciler() { stop(); }

Status LedgerReconciler::start() {
  auto next = md::get(store_, LedgerIdAllocator::kNextIdKey);
  if (next.is_ok()) {
    try {
      first_of_process_ = std::stoull(next->value);
    } catch (const std::exception&) {
      return Status::corruption("ledger id counter holds '" + next->value + "'");
    }
  } else if (next.status().code() != common::ErrorCode::kNotFound) {
    return next.status();
  }
  thread_ = std::thread([this]() { run(); });
  return Status::ok();
}

void LedgerReconciler::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  abort_ = true;
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LedgerReconciler::run() {
  pthread_setname_np(pthread_self(), "ledger-reconcile");
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    auto pass = run_pass();
    passes_.fetch_add(1, std::memory_order_release);
    if (!pass.is_ok() && !abort_) MLOG_WARN("ledger reconcile: {}", pass.status().to_string());
    lock.lock();
    if (interval_.count() <= 0) break;
    wake_.wait_for(lock, interval_, [this]() { return stopping_; });
  }
}

bool LedgerReconciler::ledger_recorded(LedgerId id) {
  if (records_prefix_.empty()) return true;
  auto r = md::get(store_, records_prefix_ + "/" + std::to_string(id));
  return r.status().code() != common::ErrorCode::kNotFound;  // an error: counted as there
}

Result<LedgerReconciler::Pass> LedgerReconciler::run_pass() {
  std::lock_guard pass_lock(pass_mu_);
  Pass pass;
  // Storage first: a ledger made after this list is not a candidate, and
  // one made before it is named by the time its list is read, unless its
  // list write is still under way (then it waits for the next pass).
  std::vector<LedgerId> stored = storage_.list_ledgers();
  pass.stored = stored.size();
  // Sorted once read: 8 bytes an id, for the ledgers of every topic.
  std::vector<LedgerId> named;
  // Depth-first over tenant / namespace / domain / topic.
  std::vector<std::pair<std::string, int>> keys{{kRoot, 0}};
  while (!keys.empty()) {
    if (abort_) return Status::unavailable("stopping");
    auto [key, depth] = std::move(keys.back());
    keys.pop_back();
    if (depth == kKeyDepth) {
      auto record = md::get(store_, key);
      if (!record.is_ok()) {
        if (record.status().code() == common::ErrorCode::kNotFound) continue;  // deleted meanwhile
        return record.status();
      }
      auto ids = ManagedLedger::stored_ledgers(record->value);
      if (!ids.is_ok()) return Status(ids.status().code(), key + ": " + ids.status().message());
      named.insert(named.end(), ids->begin(), ids->end());
      continue;
    }
    auto children = md::list_children(store_, key);
    if (!children.is_ok()) return children.status();
    for (auto it = children->rbegin(); it != children->rend(); ++it) keys.emplace_back(key + "/" + *it, depth + 1);
  }
  std::sort(named.begin(), named.end());
  named.erase(std::unique(named.begin(), named.end()), named.end());
  pass.named = named.size();

  std::set<LedgerId> unnamed_now;
  std::vector<LedgerId> doomed;
  for (LedgerId id : stored) {
    if (std::binary_search(named.begin(), named.end(), id)) continue;
    // In a cluster, ids below this process's first say nothing (other
    // members hand them out from blocks reserved earlier and write copies
    // here before their lists name them): a copy goes at once only when its
    // ledger's record is gone cluster-wide, else it waits a pass.
    const bool old = holds_every_ledger_ ? id < first_of_process_ : !ledger_recorded(id);
    if (!old && unnamed_.count(id) == 0) {
      unnamed_now.insert(id);  // may be a list write under way: the next pass decides
      continue;
    }
    doomed.push_back(id);
  }
  if (doomed.size() > kMaxUnchecked && doomed.size() * 2 > stored.size()) {
    MLOG_ERROR("ledger reconcile: {} of storage's {} ledgers belong to no topic; deleting none. Is the metadata "
               "directory the one this storage was written with?",
               doomed.size(), stored.size());
    pass.refused = doomed.size();
    unnamed_now.insert(doomed.begin(), doomed.end());
    doomed.clear();
  }
  for (LedgerId id : doomed) {
    if (abort_) return Status::unavailable("stopping");
    Status st = delete_and_wait(storage_, id);
    if (st.is_ok() || st.code() == common::ErrorCode::kNotFound) {
      ++pass.deleted;
      deleted_.inc();
      MLOG_WARN("ledger reconcile: ledger {} belonged to no topic (left by a crash); deleted", id);
    } else {
      MLOG_WARN("ledger reconcile: ledger {} belongs to no topic; deleting it failed: {}", id, st.to_string());
      unnamed_now.insert(id);
    }
  }
  unnamed_ = std::move(unnamed_now);
  pass.waiting = unnamed_.size();

  // Named but not stored, by a list taken after the lists were read (a
  // ledger made meanwhile is in it).
  std::vector<LedgerId> after = storage_.list_ledgers();
  std::sort(after.begin(), after.end());
  for (LedgerId id : named) {
    if (holds_every_ledger_ && !std::binary_search(after.begin(), after.end(), id)) ++pass.missing;
  }
  missing_.set(static_cast<double>(pass.missing));
  if (pass.missing > 0) {
    MLOG_ERROR("ledger reconcile: {} ledgers that topics name are missing from storage; their entries are lost",
               pass.missing);
  }
  MLOG_DEBUG("ledger reconcile: {} stored, {} named, {} deleted, {} left for the next pass, {} missing",
             pass.stored, pass.named, pass.deleted, pass.waiting, pass.missing);
  return pass;
}

}  // namespace magnetar::ledger
