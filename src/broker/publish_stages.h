// PublishStages: where each publish's time goes, from the request read off
// a client's socket to its answer queued for that socket, as histograms in
// /metrics: magnetar_publish_stage_seconds{protocol, stage}.
//
//   to_topic  read -> the topic took the entry (the hop to the topic's
//             reactor, loading the topic, a rate limit holding the reader)
//   ledger    the topic took it -> handed to storage (deduplication
//             recovery, a backlog quota holding producers, a ledger
//             rollover, storage's queue full)
//   storage   handed to storage -> its completion ran on the topic's
//             reactor (the journal's queue, write, sync and the hop back;
//             magnetar_storage_journal_stage_seconds splits it)
//   answer    completion ran -> the answer is queued on the connection
//             (the hop back to the connection's reactor)
//   broker    everything but storage: the time the broker adds to the disk
//   total     read -> answer queued
//
// Every stored publish is measured (four clock reads per entry, not per
// message); for AMQP, every one routed to a single queue. Publishes
// answered without storing (duplicates, errors) are not. One set per
// protocol, shared by every reactor.
#pragma once

#include <cstdint>

#include "common/metrics.h"
#include "ledger/add_timing.h"

namespace magnetar::broker {

enum class PublishProtocol { kPulsar, kKafka, kAmqp };

class PublishStages {
 public:
  // The process-wide set of `protocol`.
  static PublishStages& of(PublishProtocol protocol);

  // What a publish carries from read to answer.
  struct Marks {
    int64_t received_ns = 0;  // read off the socket (common::monotonic_ns())
    int64_t at_topic_ns = 0;  // the topic took it
    ledger::AddTiming stored{};  // copied from ledger::current_add_timing() in the publish callback
    bool has_stored = false;
    // In the publish callback: takes the managed ledger's figures.
    void take_add_timing();
  };

  // The answer to a publish marked `marks` was queued now. Nothing is
  // recorded for a publish that was not stored.
  void record(const Marks& marks);

 private:
  explicit PublishStages(const char* protocol);
  common::Histogram& to_topic_;
  common::Histogram& ledger_;
  common::Histogram& storage_;
  common::Histogram& answer_;
  common::Histogram& broker_;
  common::Histogram& total_;
};

}  // namespace magnetar::broker
