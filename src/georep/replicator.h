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
// Replicated subscriptions. A subscription marked replicated (a Pulsar
// consumer's replicate_subscription_state, or the REST call) has its
// acknowledgements sent to the remote cluster about once a second, so that
// a consumer that moves there resumes close to where it acknowledged here
// instead of at its initial position. Pulsar writes snapshot markers into
// the log for this; both ends here are Magnetar, and the replication
// stream itself says what is consumed where, so nothing is added to the
// log and no consumer of any protocol can ever be handed a marker:
// - Reading this log, the replicator sees the entries that came from the
//   remote cluster (replicated_from), each with its index in the remote
//   topic (the link's sequence ids) and its position here. A sample
//   (remote index i, local position x) says: every remote entry up to i
//   that came from there is here at or before x, and so is every entry of
//   this cluster the remote held before i (it was here before it got
//   there, and i came back after it). With only two clusters, a
//   subscription here acknowledged through x has consumed the remote
//   topic through i ("local index" in the update).
// - The remote answers the other half from its own replicator's samples
//   of this cluster's entries: everything there up to the entry that holds
//   this cluster's index through which the subscription is acknowledged,
//   provided every entry there that did not come from here is covered by
//   the first half (consumed_through).
// The remote moves its subscription forward to the later of the two (made
// when missing), never back. Samples live in memory, at most kMaxSamples
// per replicator, thinned evenly as they age; after a restart updates wait
// for new ones. Updates go over the cluster record's web service URL
// (georep/remote_admin.h) from the service's thread, one call at a time.
//
// Threads: the topic's home reactor, like its Topic, which owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
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
  std::optional<ledger::Position> consumed_through(const std::string& cluster, int64_t origin_index,
                                                   std::optional<ledger::Position> covered) const override;
  // Whether the topic is replicated to this cluster alone (the local index
  // of an update is sound only then: a third cluster's entries there may
  // not have reached this one).
  void set_sole_remote(bool sole) { sole_remote_ = sole; }
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

  // Notes an entry read here that came from the remote cluster.
  void sample(int64_t remote_index, ledger::Position at);
  // The remote index every remote entry up to is here at or before p.
  std::optional<int64_t> remote_index_through(ledger::Position p) const;
  // Sends the replicated subscriptions' acknowledgements that moved.
  void send_acks();

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
  // Replicated subscriptions.
  struct Sample {
    int64_t remote_index;
    ledger::Position local;
    std::optional<ledger::Position> other;  // the last entry before it that did not come from there
  };
  static constexpr size_t kMaxSamples = 64;
  std::deque<Sample> samples_;
  std::optional<ledger::Position> last_other_;  // the last entry read that did not come from there
  std::map<std::string, ledger::Position> acks_sent_;    // subscription -> mark-delete position sent
  bool acks_in_flight_ = false;
  std::string acks_error_;  // the last failure to send them, logged once
  bool sole_remote_ = true;
  runtime::Timer acks_timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace magnetar::georep
