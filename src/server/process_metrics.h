// Process-level metrics: uptime, memory, CPU, file descriptors, reactor lag
// and mailbox depth. Read at scrape time; nothing runs while nobody scrapes.
#pragma once

#include <cstdint>

#include "common/metrics.h"
#include "runtime/runtime.h"

namespace magnetar::server {

// Registers collectors on `registry`; returns their ids for removal.
std::vector<uint64_t> register_process_metrics(common::MetricsRegistry& registry,
                                               runtime::Runtime& runtime, const std::string& version);
// Resident memory in bytes, from /proc/self/statm; 0 if unreadable.
uint64_t resident_memory_bytes();

}  // namespace magnetar::server
