// Replicator: copies one topic's entries to the same topic on one remote
// cluster (Pulsar's PersistentReplicator).
//
// It reads the local log through its own durable cursor, named
// kReplicatorPrefix + remote cluster (hidden from subscription lists), and
// sends each entry over a RemoteLink to the remote cluster with its
// metadata's replicated_from set to the local cluster. Entries that carry a
// replicated_from already came from another cluster and are never sent on
// (no ping-pong); entries whose replicate_to leaves the remote cluster out
// are skipped too. The cursor moves only over entries the remote cluster
// acknowledged, in order, so nothing is lost when either side stops.
//
// Exactly once on the remote side: the link's producer is named
// kReplicatorPrefix + local cluster and each entry goes out with its
// origin position as the sequence ids, the topic-wide index of its first
// message to that of its last (the position Kafka offsets are made of:
// every entry has one, whichever protocol produced it). The remote topic
// deduplicates a replicated namespace's replicator producers by those
// (broker/dedup.h), so what a restart or a lost link sends again is stored
// once. The entry's ledger:entry position goes along in the
// kOriginPositionProperty message property, for people.
//
// At most options.max_in_flight entries (and max_in_flight_bytes) are
// unacknowledged at once. When
// the link fails, everything in flight is read again from the cursor and
// the link is made again after a back-off that doubles up to max_backoff.
// A link that stays silent for three keepalive periods (a cut cable gives
// no error) counts as failed.
//
// Threads: the topic's home reactor, like its Topic, which owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "broker/topic.h"
#include "georep/remote_link.h"
#include "ledger/position.h"
#include "runtime/timer.h"

namespace magnetar::georep {

class GeoReplication;

inline constexpr std::string_view kOriginPositionProperty = "__replicated_origin_position";

class Replicator final : public broker::TopicAttachment, public LinkListener {
 public:
  // REQUIRES: on `topic`'s home reactor; `service` outlives this.
  Replicator(broker::Topic& topic, std::string remote_cluster, GeoReplication& service);
  ~Replicator() override;

  // Opens the cursor (at the start of the log when it is new, so what the
  // topic holds is replicated), then connects.
  void start();
  const std::string& remote_cluster() const { return remote_; }
  std::string cursor_name() const { return std::string(broker::kReplicatorPrefix) + remote_; }

  void on_entries_added() override { pump(); }
  bool busy() const override;
  void add_stats(broker::TopicStats& stats) const override;

 private:
  struct InFlight {
    ledger::Position position;
    uint64_t sequence_id = 0;  // highest sequence id of the SEND; unused when skipped
    int64_t publish_ms = 0;
    uint32_t messages = 0;
    uint64_t bytes = 0;
    bool sent = false;  // false: skipped, nothing went out
    bool done = false;  // acknowledged (or skipped) and waiting for those before it
  };

  void connect();
  // Pings the link, or drops it when it has been silent too long.
  void keep_alive();
  void retry_later(const common::Status& why);
  // While the link is down: learns the publish time of the oldest entry not
  // yet replicated, for the delay in stats, when nothing told it yet.
  void note_oldest_pending();
  // Reads and sends while the link is ready and there is room.
  void pump();
  void send_entries(std::vector<ledger::LedgerEntry> entries);
  // Moves the cursor over the acknowledged entries at the front.
  void ack_front();
  uint64_t backlog_messages() const;

  void link_ready() override;
  void link_receipt(uint64_t sequence_id) override;
  void link_failed(const common::Status& why) override;

  broker::Topic& topic_;
  const std::string remote_;
  GeoReplication& service_;
  const std::string topic_name_;
  ledger::Cursor* cursor_ = nullptr;
  RemoteLink* link_ = nullptr;  // owned by its connection
  bool connecting_ = false;
  bool reading_ = false;
  bool wake_ = false;  // entries were added while a read was under way
  uint64_t epoch_ = 0;  // a link failure makes reads and connects under way stale
  ledger::Position read_after_;
  std::deque<InFlight> in_flight_;
  size_t in_flight_bytes_ = 0;
  std::chrono::milliseconds backoff_;
  runtime::Timer retry_timer_;
  runtime::Timer keepalive_timer_;
  uint64_t messages_out_ = 0;
  uint64_t bytes_out_ = 0;
  int64_t oldest_pending_ms_ = 0;  // publish time of the oldest entry read and not acknowledged
  std::string last_error_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace magnetar::georep
