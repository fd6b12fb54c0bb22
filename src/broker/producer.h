// Producers on a topic: options, access modes and the admission rules.
//
// Access modes follow Pulsar's: Shared (any number of shared producers),
// Exclusive (refused while any other producer is there), WaitForExclusive
// (queued until the topic has no producer, then admitted as the exclusive
// one) and ExclusiveWithFencing (takes over: every other producer is closed).
// A shared producer is refused while an exclusive one is there.
//
// ProducerAccess is the bookkeeping alone; Topic applies its decisions.
// Threads: on the topic's home reactor.
#pragma once

#include <cstdint>
#include <vector>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "broker/client_info.h"
#include "common/status.h"

namespace magnetar::broker {

enum class ProducerAccessMode { kShared, kExclusive, kWaitForExclusive, kExclusiveWithFencing };

struct ProducerOptions {
  uint64_t id = 0;  // broker-wide id of this producer
  std::string name;
  ProducerAccessMode access_mode = ProducerAccessMode::kShared;
  ClientInfo client{};
  // Called on the home reactor when the broker closes the producer (topic
  // closed or unloaded, fenced by an exclusive producer, backlog quota);
  // the producer is gone from the topic by then. Never called after
  // remove_producer. May be empty.
  std::function<void(const common::Status&)> on_closed{};
};

struct ProducerAdmission {
  // Highest sequence id stored for this producer name when deduplication is
  // on; -1 otherwise or when none.
  int64_t last_sequence_id = -1;
  // Bumped every time a producer gains exclusive access.
  uint64_t topic_epoch = 0;
};

class ProducerAccess {
 public:
  enum class Decision {
    kAdmit,           // register it now
    kAdmitAndFence,   // register it after closing every other producer
    kWait,            // queue it until the topic has no producer
    kRefuseBusy,      // a shared producer while an exclusive one is there (ProducerBusy)
    kRefuseFenced,    // an exclusive producer while others are there (ProducerFenced)
  };

  Decision decide(ProducerAccessMode mode) const;
  // Records an admitted producer; bumps the epoch for exclusive access.
  void admitted(uint64_t id, ProducerAccessMode mode);
  // Forgets an admitted or waiting producer.
  void removed(uint64_t id);
  // Queues a waiting producer (kWait).
  void wait(uint64_t id) { waiting_.push_back(id); }
  bool is_waiting(uint64_t id) const;
  // The waiting producer to admit now that the topic has no producer.
  std::optional<uint64_t> next_waiting() const;

  size_t producers() const { return modes_.size(); }
  bool has_exclusive() const { return exclusive_.has_value(); }
  uint64_t epoch() const { return epoch_; }

 private:
  std::map<uint64_t, ProducerAccessMode> modes_;  // admitted
  std::optional<uint64_t> exclusive_;
  std::vector<uint64_t> waiting_;  // in arrival order; a vector costs nothing while empty
  uint64_t epoch_ = 0;
};

std::string_view producer_access_mode_name(ProducerAccessMode m);  // Pulsar's: "Shared", "Exclusive", ...

}  // namespace magnetar::broker
