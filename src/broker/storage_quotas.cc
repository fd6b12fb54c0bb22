#include "broker/storage_quotas.h"

#include <future>
#include <optional>
#include <pthread.h>
#include <unordered_map>

#include "broker/tenancy.h"
#include "common/logging.h"
#include "ledger/managed_ledger.h"
#include "metadata/blocking.h"

namespace magnetar::broker {

namespace md = metadata::blocking;
using common::Result;
using common::Status;

namespace {

// The live size of every loaded persistent topic, by name; empty when the
// reactors do not answer in time (the pass then reads stored sizes only).
std::unordered_map<std::string, uint64_t> loaded_sizes(BrokerService& broker) {
  auto promise = std::make_shared<std::promise<std::vector<BrokerService::TopicSample>>>();
  auto future = promise->get_future();
  broker.collect_stats([promise](std::vector<BrokerService::TopicSample> samples) {
    promise->set_value(std::move(samples));
  });
  std::unordered_map<std::string, uint64_t> sizes;
  if (future.wait_for(std::chrono::seconds(10)) != std::future_status::ready) return sizes;
  for (const auto& s : future.get()) {
    if (s.name.domain == TopicDomain::kPersistent) sizes[s.name.to_string()] = s.stats.storage_size;
  }
  return sizes;
}

}  // namespace

StorageQuotas::StorageQuotas(metadata::Store& store, BrokerService& broker, std::chrono::milliseconds interval)
    : store_(store), broker_(broker), interval_(interval) {}

StorageQuotas::~StorageQuotas() { stop(); }

Status StorageQuotas::start() {
  thread_ = std::thread([this]() { run(); });
  return Status::ok();
}

void StorageQuotas::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::map<std::string, TenantStorage> StorageQuotas::last_pass() const {
  std::lock_guard lock(mu_);
  return last_;
}

void StorageQuotas::run() {
  pthread_setname_np(pthread_self(), "storage-quota");
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    pass();
    lock.lock();
    wake_.wait_for(lock, interval_, [this]() { return stopping_; });
  }
}

Result<uint64_t> StorageQuotas::stored_bytes(const std::string& tenant) {
  return stored_bytes(tenant, loaded_sizes(broker_));
}

Result<uint64_t> StorageQuotas::stored_bytes(const std::string& tenant,
                                             const std::unordered_map<std::string, uint64_t>& loaded) {
  auto topics = stored_topics_of_tenant(store_, tenant);
  if (!topics.is_ok()) return topics.status();
  uint64_t total = 0;
  for (const auto& t : *topics) {
    if (auto it = loaded.find(t.name.to_string()); it != loaded.end()) {
      total += it->second;
      continue;
    }
    auto record = md::get(store_, t.key);
    if (!record.is_ok()) continue;  // deleted meanwhile
    auto size = ledger::ManagedLedger::stored_size(record->value);
    if (size.is_ok()) total += *size;
  }
  return total;
}

void StorageQuotas::pass() {
  std::map<std::string, TenantStorage> found;
  auto limited = md::list_children(store_, "/admin/tenant-limits");
  if (limited.is_ok()) {
    std::optional<std::unordered_map<std::string, uint64_t>> loaded;  // gathered once, when a quota needs it
    for (const auto& tenant : *limited) {
      auto record = md::get(store_, tenant_limits_key(tenant));
      if (!record.is_ok()) continue;
      auto limits = decode_tenant_limits(record->value);
      if (!limits.is_ok() || limits->storage_quota_bytes <= 0) continue;
      if (!loaded) loaded = loaded_sizes(broker_);
      auto stored = stored_bytes(tenant, *loaded);
      if (!stored.is_ok()) {
        MLOG_WARN("storage of tenant {}: {}", tenant, stored.status().to_string());
        continue;
      }
      found[tenant] = TenantStorage{limits->storage_quota_bytes, *stored,
                                    *stored >= static_cast<uint64_t>(limits->storage_quota_bytes)};
    }
  } else if (limited.status().code() != common::ErrorCode::kNotFound) {
    MLOG_WARN("storage quotas: {}", limited.status().to_string());
    return;
  }
  std::lock_guard lock(mu_);
  for (auto it = refused_.begin(); it != refused_.end();) {
    auto f = found.find(it->first);
    if (f != found.end() && f->second.exceeded) {
      ++it;
      continue;
    }
    it->second->storage_exceeded.store(false, std::memory_order_relaxed);
    MLOG_INFO("tenant {} is under its storage quota again: publishing resumes", it->first);
    it = refused_.erase(it);
  }
  for (const auto& [tenant, usage] : found) {
    if (!usage.exceeded || refused_.count(tenant) > 0) continue;
    auto counters = broker_.tenant_counters(tenant);
    counters->storage_exceeded.store(true, std::memory_order_relaxed);
    refused_[tenant] = std::move(counters);
    MLOG_WARN("tenant {} stores {} bytes, at or over its storage quota of {}: publishing is refused", tenant,
              usage.stored_bytes, usage.quota_bytes);
  }
  last_ = std::move(found);
}

}  // namespace magnetar::broker
