// Topic compaction, Pulsar's model: a pass reads a topic's log through its
// current compacted view from the start up to a horizon (the last entry
// stored when the pass began, or the last one older than
// min.compaction.lag.ms), keeps the latest message of each key, and writes
// the entries holding them into a new compacted ledger, which the managed
// ledger installs with the horizon by one compare-and-set of its ledger
// list (ledger/managed_ledger.h CompactedLedger); the previous compacted
// ledger is deleted after the switch. Every protocol reads the same view:
// Pulsar's read_compacted subscriptions and readers, and Kafka fetches of a
// topic whose cleanup.policy includes compact.
//
// Two phases, as Pulsar's compactor: the first reads the view through the
// horizon and remembers, per key, where its latest message is; the second
// reads it again and writes what survives. Batches are compacted per
// message: a batch entry keeps its place and its message count (Kafka
// offsets and Pulsar batch indexes stay what they were), the messages a
// later one with the same key obscures are marked compacted_out with their
// values dropped, and an entry left with no live message is left out. A
// tombstone (a key with an empty Pulsar payload or a null Kafka value)
// stays in the view while younger than delete.retention.ms and then goes,
// its key with it. In a compact,delete topic, entries older than its
// retention time leave the view too (CompactionSettings::max_age). Messages without a key are left out of the view (as
// Pulsar's topicCompactionRetainNullKey=false), and so are entries the
// codec cannot read, which are reported and kept whole instead.
//
// Off the producers' path: a pass runs on the topic's home reactor in
// bounded steps (one read of at most kEntriesPerStep entries, then its
// writes), throttled to max_read_bytes_per_second, and producers append to
// the log meanwhile. Restart-safe: the ledger being written is named in the
// ledger list before it exists; a pass cut by a crash leaves the installed
// view in place and its ledger is deleted when the log next opens.
//
// Threads: a pass on its topic's home reactor. CompactionBoard from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/bytes.h"
#include "common/result.h"
#include "ledger/managed_ledger.h"

namespace magnetar::broker {

// One message of a stored entry, as compaction sees it.
struct CompactionMessage {
  bool has_key = false;
  std::string key;
  bool tombstone = false;      // a key with no value: removes the key
  bool compacted_out = false;  // removed by an earlier pass
};

// What compaction needs to know of the stored payload format, which is the
// protocols' (Pulsar's wire format): the server gives the broker one from
// protocol/pulsar. Thread-safe.
class CompactionCodec {
 public:
  virtual ~CompactionCodec() = default;
  // The messages of an entry's payload in order (a batch's, or the one
  // message of an entry without a batch); an error for one that does not parse.
  virtual common::Result<std::vector<CompactionMessage>> messages(const common::Slice& payload) const = 0;
  // The payload with message i's value kept where keep[i], and marked
  // compacted out (value dropped) elsewhere. REQUIRES: keep.size() is the
  // number of messages() returned, and at least one is kept.
  virtual common::Result<common::Slice> keep_only(const common::Slice& payload,
                                                  const std::vector<bool>& keep) const = 0;
};

struct CompactionSettings {
  // Tombstones stay in the view this long after they were published.
  std::chrono::milliseconds delete_retention{0};
  // Messages published less than this long ago are not compacted yet.
  std::chrono::milliseconds min_lag{0};
  // A compact-only topic: the view replaces the log's history, whose
  // ledgers wholly before the horizon go (ManagedLedger::install_compacted_ledger).
  bool drop_covered = false;
  // A compact,delete topic's retention time: entries published longer ago
  // leave the view, their keys (and tombstones) with them, as Kafka deletes
  // a compacted log's segments past retention.ms. 0: kept at any age. With
  // it, a pass rewrites the view even when nothing came after its horizon.
  std::chrono::milliseconds max_age{0};
  // The pass reads at most this many bytes a second (both phases); 0: no limit.
  int64_t max_read_bytes_per_second = 32ll << 20;
  // A pass remembers at most this many keys; past it, it fails.
  size_t max_keys = 4'000'000;
};

struct CompactionOutcome {
  bool nothing_to_do = false;  // the view covers the horizon already
  ledger::Position horizon;
  int64_t horizon_index = 0;
  uint64_t entries_read = 0;    // by both phases
  uint64_t bytes_read = 0;
  uint64_t entries_written = 0;
  uint64_t bytes_written = 0;
  uint64_t keys = 0;            // live keys in the view
  uint64_t bytes_before = 0;    // the log's bytes (its view's and its ledgers') when the pass began
  uint64_t bytes_after = 0;     // and when it ended
  int64_t duration_ms = 0;
};

// Runs one pass over `log` (see the top of this file). `alive` is the
// topic's liveness: a pass whose topic went away stops and abandons its
// ledger. `codec` outlives the pass. REQUIRES: on the log's home reactor.
void run_compaction(std::shared_ptr<ledger::ManagedLedger> log, const CompactionCodec& codec,
                    CompactionSettings settings, std::weak_ptr<bool> alive,
                    ledger::Callback<common::Result<CompactionOutcome>> done);

// The latest pass of each topic on this node, as Pulsar's
// LongRunningProcessStatus reports it. Thread-safe; bounded by the topics.
enum class CompactionState { kNotRun, kRunning, kSuccess, kError };
std::string_view compaction_state_name(CompactionState s);  // "NOT_RUN", "RUNNING", "SUCCESS", "ERROR"

struct CompactionReport {
  CompactionState state = CompactionState::kNotRun;
  std::string last_error;
  CompactionOutcome last;  // of the latest pass that succeeded
  int64_t started_ms = 0;  // wall clock of the latest pass
};

class CompactionBoard {
 public:
  // Marks `topic` running; false when a pass of it is running already.
  bool try_start(const std::string& topic);
  void finish(const std::string& topic, const common::Result<CompactionOutcome>& outcome);
  CompactionReport report(const std::string& topic) const;
  void forget(const std::string& topic);

 private:
  mutable std::mutex mu_;
  std::map<std::string, CompactionReport> reports_;
};

}  // namespace magnetar::broker
