// StorageQuotas: each tenant's stored bytes against its storage quota
// (TenantLimits::storage_quota_bytes), over all its topics, loaded or not.
//
// Every `interval` it sums, for each tenant that has a quota, the bytes its
// persistent topics hold: a loaded topic's live size, and for the others the
// ledger sizes their stored ledger lists record. A tenant at or over its
// quota has publishing refused on all its topics (Topic::publish; new
// producers too) until retention, deleted topics or a larger quota bring it
// under again; the next pass lifts the refusal. Nothing is deleted to make
// room. Tenants without a quota cost nothing.
//
// Threads: its own ("storage-quota"), which may block on the metadata store
// and on the reactors' answers.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "broker/broker_service.h"
#include "metadata/store.h"
#include "runtime/component.h"

namespace magnetar::broker {

struct TenantStorage {
  int64_t quota_bytes = -1;
  uint64_t stored_bytes = 0;
  bool exceeded = false;
};

class StorageQuotas final : public runtime::Component {
 public:
  StorageQuotas(metadata::Store& store, BrokerService& broker, std::chrono::milliseconds interval);
  ~StorageQuotas() override;

  std::string_view name() const override { return "storage-quota"; }
  common::Status start() override;
  void stop() override;

  // Any thread: what the last pass found, by tenant (tenants with a quota).
  std::map<std::string, TenantStorage> last_pass() const;
  // The bytes `tenant` stores now (blocking; not on a reactor or the
  // metadata thread).
  common::Result<uint64_t> stored_bytes(const std::string& tenant);

 private:
  // The same, with the live sizes of the loaded topics (loaded_sizes())
  // gathered once for all the tenants of a pass.
  common::Result<uint64_t> stored_bytes(const std::string& tenant,
                                        const std::unordered_map<std::string, uint64_t>& loaded);
  void run();
  void pass();

  metadata::Store& store_;
  BrokerService& broker_;
  const std::chrono::milliseconds interval_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::map<std::string, TenantStorage> last_;
  // Held while a tenant is over its quota, so the refusal stays set while
  // none of its topics is loaded.
  std::map<std::string, std::shared_ptr<TenantCounters>> refused_;
  std::thread thread_;
};

}  // namespace magnetar::broker
