// What a tenant uses right now, over every reactor: its producers,
// consumers and client connections, counted against the tenant's limits
// (TenantLimits). A slot is
// held by the producer or consumer it admitted and given back when that one
// goes, however it goes (closed, fenced, its connection lost, its topic
// unloaded).
//
// Threads: any. Taking a slot is one atomic increment (and a decrement when
// refused). The counters live in the tenant's TenantState (tenant_state.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"

namespace magnetar::broker {

struct TenantCounters {
  std::atomic<int64_t> producers{0};
  std::atomic<int64_t> consumers{0};
  std::atomic<int64_t> connections{0};
  // Set while the tenant stores at least its storage quota
  // (storage_quotas.h): its topics refuse publishing.
  std::atomic<bool> storage_exceeded{false};
};

class TenantSlot {
 public:
  using Counter = std::atomic<int64_t> TenantCounters::*;

  TenantSlot() = default;
  // Takes one of `counter` unless `max` (> 0) are taken already; max <= 0
  // counts without a limit. When full, ResourceExhausted "Tenant <tenant>
  // reached max <what> limit (<max>)" (the words are built only then).
  static common::Result<TenantSlot> take(std::shared_ptr<TenantCounters> counters, Counter counter, int64_t max,
                                         std::string_view tenant, std::string_view what) {
    if (counters == nullptr) return TenantSlot();
    int64_t before = ((*counters).*counter).fetch_add(1, std::memory_order_relaxed);
    if (max > 0 && before >= max) {
      ((*counters).*counter).fetch_sub(1, std::memory_order_relaxed);
      return common::Status::resource_exhausted("Tenant " + std::string(tenant) + " reached max " +
                                                std::string(what) + " limit (" + std::to_string(max) + ")");
    }
    return TenantSlot(std::move(counters), counter);
  }

  TenantSlot(TenantSlot&& other) noexcept : counters_(std::move(other.counters_)), counter_(other.counter_) {}
  TenantSlot& operator=(TenantSlot&& other) noexcept {
    if (this != &other) {
      release();
      counters_ = std::move(other.counters_);
      counter_ = other.counter_;
    }
    return *this;
  }
  TenantSlot(const TenantSlot&) = delete;
  TenantSlot& operator=(const TenantSlot&) = delete;
  ~TenantSlot() { release(); }

 private:
  TenantSlot(std::shared_ptr<TenantCounters> counters, Counter counter)
      : counters_(std::move(counters)), counter_(counter) {}
  void release() {
    if (counters_) ((*counters_).*counter_).fetch_sub(1, std::memory_order_relaxed);
    counters_.reset();
  }

  std::shared_ptr<TenantCounters> counters_;
  Counter counter_ = nullptr;
};

}  // namespace magnetar::broker
