#include "admin/handlers/topic_stats_json.h"

#include <fmt/format.h>

#include "common/clock.h"
#include "ledger/managed_ledger.h"

namespace magnetar::admin {

namespace {

double average(uint64_t total, uint64_t count) { return count == 0 ? 0.0 : static_cast<double>(total) / count; }

// Bytes of `entries` entries at the topic's average entry size.
uint64_t estimated_bytes(const broker::TopicStats& s, uint64_t entries) {
  return static_cast<uint64_t>(average(s.storage_size, s.entries) * static_cast<double>(entries));
}

Json consumer_json(const broker::ConsumerStats& c) {
  Json out{{"msgRateOut", c.msg_rate_out},
           {"msgThroughputOut", c.byte_rate_out},
           {"bytesOutCounter", c.bytes_out},
           {"msgOutCounter", c.messages_out},
           {"msgRateRedeliver", 0.0},
           {"chunkedMessageRate", 0.0},
           {"consumerName", c.consumer_name},
           {"address", c.client.address},
           {"clientVersion", c.client.client_version},
           {"connectedSince", c.client.connected_since_ms > 0 ? iso_time(c.client.connected_since_ms) : ""},
           {"protocol", c.client.protocol},
           {"availablePermits", c.permits},
           {"unackedMessages", c.unacked_messages},
           {"avgMessagesPerEntry", 0},
           {"blockedConsumerOnUnackedMsgs", c.blocked_on_unacked},
           {"lastAckedTimestamp", 0},
           {"lastConsumedTimestamp", 0},
           {"metadata", Json::object()}};
  if (!c.hash_ranges.empty()) {  // Key_Shared, as Pulsar shows them: "[start, end]"
    Json ranges = Json::array();
    for (const auto& r : c.hash_ranges) ranges.push_back(fmt::format("[{}, {}]", r.start, r.end));
    out["keyHashRanges"] = ranges;
  }
  return out;
}

Json subscription_json(const broker::TopicStats& t, const broker::SubscriptionStats& s) {
  Json consumers = Json::array();
  for (const auto& c : s.consumer_list) consumers.push_back(consumer_json(c));
  return Json{{"msgRateOut", s.msg_rate_out},
              {"msgThroughputOut", s.byte_rate_out},
              {"bytesOutCounter", s.bytes_out},
              {"msgOutCounter", s.messages_out},
              {"dispatchRateLimitedTimes", s.dispatch_rate_limited_times},
              {"msgRateRedeliver", 0.0},
              {"chunkedMessageRate", 0},
              {"msgBacklog", s.backlog_messages},
              {"backlogSize", estimated_bytes(t, s.backlog_entries)},
              {"msgBacklogNoDelayed", s.backlog_messages - std::min(s.backlog_messages, s.delayed_entries)},
              {"blockedSubscriptionOnUnackedMsgs", s.blocked_on_unacked},
              {"msgDelayed", s.delayed_entries},
              {"unackedMessages", s.unacked_messages},
              {"type", s.typed ? std::string(broker::subscription_type_name(s.type)) : std::string("None")},
              {"msgRateExpired", 0.0},
              {"totalMsgExpired", 0},
              {"lastExpireTimestamp", 0},
              {"lastConsumedFlowTimestamp", 0},
              {"lastConsumedTimestamp", 0},
              {"lastAckedTimestamp", 0},
              {"lastMarkDeleteAdvancedTimestamp", 0},
              {"consumers", consumers},
              {"isDurable", s.durable},
              {"isReplicated", s.replicated},
              {"allowOutOfOrderDelivery", false},
              {"consumersAfterMarkDeletePosition", Json::object()},
              {"nonContiguousDeletedMessagesRanges", 0},
              {"nonContiguousDeletedMessagesRangesSerializedSize", 0},
              {"subscriptionProperties", Json::object()}};
}

// Adds b's numbers into a's, key by key (numbers only; the rest keeps a's).
void add_numbers(Json& a, const Json& b) {
  for (auto it = b.begin(); it != b.end(); ++it) {
    if (!it.value().is_number()) continue;
    if (!a.contains(it.key()) || !a[it.key()].is_number()) {
      a[it.key()] = it.value();
    } else if (a[it.key()].is_number_float() || it.value().is_number_float()) {
      a[it.key()] = a[it.key()].get<double>() + it.value().get<double>();
    } else {
      a[it.key()] = a[it.key()].get<int64_t>() + it.value().get<int64_t>();
    }
  }
}

}  // namespace

std::string iso_time(int64_t ms) { return common::iso8601_utc(ms); }

std::string position_string(ledger::Position p) { return fmt::format("{}:{}", p.ledger, p.entry); }

// Pulsar's "replication" map: per remote cluster this topic replicates to,
// what its replicator sends there and what that cluster's replicator
// publishes here. A remote that only sends here has no entry (as in Pulsar):
// its producer is in "publishers".
static Json replication_json(const broker::TopicStats& s) {
  Json out = Json::object();
  for (const auto& r : s.replication) {
    Json& j = out[r.cluster];
    j = Json{{"msgRateIn", 0.0},
             {"msgThroughputIn", 0.0},
             {"msgRateOut", r.msg_rate_out},
             {"msgThroughputOut", r.byte_rate_out},
             {"msgRateExpired", 0.0},
             {"replicationBacklog", r.backlog_messages},
             {"connected", r.connected},
             {"replicationDelayInSeconds", static_cast<int64_t>(r.delay_seconds)},
             {"msgOutCounter", r.messages_out},
             {"bytesOutCounter", r.bytes_out},
             {"inboundConnection", ""},
             {"inboundConnectedSince", ""},
             {"outboundConnection", ""},
             {"outboundConnectedSince", ""}};
    if (!r.last_error.empty()) j["lastError"] = r.last_error;
  }
  for (const auto& p : s.publishers) {
    if (!broker::is_replicator_name(p.producer_name)) continue;
    const std::string remote = p.producer_name.substr(broker::kReplicatorPrefix.size());
    if (!out.contains(remote)) continue;
    Json& j = out[remote];
    j["msgRateIn"] = j["msgRateIn"].get<double>() + p.msg_rate_in;
    j["msgThroughputIn"] = j["msgThroughputIn"].get<double>() + p.byte_rate_in;
    j["inboundConnection"] = p.client.address;
    j["inboundConnectedSince"] = p.client.connected_since_ms > 0 ? iso_time(p.client.connected_since_ms) : "";
  }
  return out;
}

Json topic_stats_json(const broker::TopicStats& s) {
  Json publishers = Json::array();
  for (const auto& p : s.publishers) {
    publishers.push_back(Json{{"accessMode", std::string(broker::producer_access_mode_name(p.access_mode))},
                              {"msgRateIn", p.msg_rate_in},
                              {"msgThroughputIn", p.byte_rate_in},
                              {"averageMsgSize", average(p.bytes_in, p.messages_in)},
                              {"chunkedMessageRate", 0.0},
                              {"producerId", p.producer_id},
                              {"producerName", p.producer_name},
                              {"address", p.client.address},
                              {"clientVersion", p.client.client_version},
                              {"connectedSince",
                               p.client.connected_since_ms > 0 ? iso_time(p.client.connected_since_ms) : ""},
                              {"protocol", p.client.protocol},
                              {"supportsPartialProducer", false},
                              {"metadata", Json::object()}});
  }
  Json subscriptions = Json::object();
  uint64_t backlog_entries = 0;
  for (const auto& sub : s.subscriptions) {
    subscriptions[sub.name] = subscription_json(s, sub);
    if (sub.durable) backlog_entries = std::max(backlog_entries, sub.backlog_entries);
  }
  return Json{{"msgRateIn", s.msg_rate_in},
              {"msgThroughputIn", s.byte_rate_in},
              {"msgRateOut", s.msg_rate_out},
              {"msgThroughputOut", s.byte_rate_out},
              {"bytesInCounter", s.bytes_in},
              {"msgInCounter", s.messages_in},
              {"bytesOutCounter", s.bytes_out},
              {"msgOutCounter", s.messages_out},
              {"averageMsgSize", average(s.bytes_in, s.messages_in)},
              {"msgChunkPublished", false},
              {"publishRateLimitedTimes", s.publish_rate_limited_times},
              {"publishRateLimit",
               {{"publishThrottlingRateInMsg", s.publish_rate_msgs},
                {"publishThrottlingRateInByte", s.publish_rate_bytes},
                {"tenantPublishThrottlingRateInMsg", s.tenant_publish_rate_msgs},
                {"tenantPublishThrottlingRateInByte", s.tenant_publish_rate_bytes}}},
              {"storageSize", s.storage_size},
              {"damagedEntries", s.damaged_entries},
              {"backlogSize", estimated_bytes(s, backlog_entries)},
              {"earliestMsgPublishTimeInBacklogs", 0},
              {"offloadedStorageSize", 0},
              {"publishers", publishers},
              {"waitingPublishers", 0},
              {"subscriptions", subscriptions},
              {"replication", replication_json(s)},
              {"deduplicationStatus", "Disabled"},
              {"nonContiguousDeletedMessagesRanges", 0},
              {"nonContiguousDeletedMessagesRangesSerializedSize", 0}};
}

Json partitioned_stats_json(const std::map<std::string, Json>& partitions, bool per_partition) {
  Json total = Json::object();
  Json publishers = Json::array();
  Json subscriptions = Json::object();
  for (const auto& [name, stats] : partitions) {
    add_numbers(total, stats);
    for (const auto& p : stats["publishers"]) publishers.push_back(p);
    for (auto it = stats["subscriptions"].begin(); it != stats["subscriptions"].end(); ++it) {
      if (!subscriptions.contains(it.key())) {
        subscriptions[it.key()] = it.value();
        continue;
      }
      Json& merged = subscriptions[it.key()];
      add_numbers(merged, it.value());
      for (const auto& c : it.value()["consumers"]) merged["consumers"].push_back(c);
    }
  }
  const double in = total.value("msgInCounter", 0.0);
  total["averageMsgSize"] = in > 0 ? total.value("bytesInCounter", 0.0) / in : 0.0;
  total["publishers"] = publishers;
  total["subscriptions"] = subscriptions;
  total["replication"] = Json::object();
  total["metadata"] = Json{{"partitions", partitions.size()}};
  total["partitions"] = Json::object();
  if (per_partition) {
    for (const auto& [name, stats] : partitions) total["partitions"][name] = stats;
  }
  return total;
}

Json internal_stats_json(broker::Topic& topic) {
  ledger::Log& log = topic.log();
  const ledger::LedgerChain& chain = log.chain();
  auto* ml = dynamic_cast<ledger::ManagedLedger*>(&log);
  Json ledgers = Json::array();
  for (const ledger::ChainLedger& l : chain.ledgers()) {
    ledgers.push_back(Json{{"ledgerId", l.id}, {"entries", l.entries}, {"size", l.size},
                           {"offloaded", false}, {"underReplicated", false}});
  }
  Json cursors = Json::object();
  for (const std::string& name : log.cursor_names()) {
    const ledger::Cursor* c = log.cursor(name);
    if (c == nullptr) continue;
    std::string deleted = "[";
    for (const auto& r : c->individually_acknowledged().ranges()) {
      if (deleted.size() > 1) deleted += ", ";
      deleted += fmt::format("({}:{}..{}:{}]", r.ledger, r.first - 1, r.ledger, r.last);
    }
    deleted += "]";
    const uint64_t backlog = c->backlog_entries(chain);
    ledger::Position read = c->mark_delete_position();
    if (broker::Subscription* sub = topic.subscription(name)) read = sub->stats().read_position;
    cursors[name] = Json{{"markDeletePosition", position_string(c->mark_delete_position())},
                         {"readPosition", position_string(ledger::Position{read.ledger, read.entry + 1})},
                         {"waitingReadOp", false},
                         {"pendingReadOps", 0},
                         {"messagesConsumedCounter", chain.total_entries() - backlog},
                         {"cursorLedger", -1},
                         {"cursorLedgerLastEntry", -1},
                         {"individuallyDeletedMessages", deleted},
                         {"lastLedgerSwitchTimestamp", ""},
                         {"state", c->durable() ? "Open" : "NonDurable"},
                         {"numberOfEntriesSinceFirstNotAckedMessage", backlog},
                         {"totalNonContiguousDeletedMessagesRange", c->individually_acknowledged().ranges().size()},
                         {"subscriptionHavePendingRead", false},
                         {"subscriptionHavePendingReplayRead", false},
                         {"properties", Json::object()}};
  }
  const ledger::ChainLedger* current = chain.empty() ? nullptr : &chain.back();
  // The compacted view (broker/compaction.h), as Pulsar shows its compacted ledger.
  Json compacted{{"ledgerId", -1}, {"entries", -1}, {"size", -1}, {"offloaded", false}, {"underReplicated", false}};
  if (ml != nullptr && ml->compacted()) {
    const ledger::CompactedLedger& view = *ml->compacted();
    compacted["ledgerId"] = view.ledger;
    compacted["entries"] = view.entries;
    compacted["size"] = view.size;
    compacted["horizon"] = position_string(view.horizon);
  }
  return Json{{"entriesAddedCounter", ml ? ml->entries_added() : chain.total_entries()},
              {"numberOfEntries", chain.total_entries()},
              {"totalSize", chain.total_size()},
              {"currentLedgerEntries", current ? current->entries : 0},
              {"currentLedgerSize", current ? current->size : 0},
              {"lastLedgerCreatedTimestamp", current ? std::to_string(current->created_ms) : ""},
              {"waitingCursorsCount", 0},
              {"pendingAddEntriesCount", 0},
              {"lastConfirmedEntry", position_string(log.last_confirmed())},
              {"state", topic.closed() ? "Closed" : "LedgerOpened"},
              {"ledgers", ledgers},
              {"cursors", cursors},
              {"schemaLedgers", Json::array()},
              {"compactedLedger", compacted}};
}

}  // namespace magnetar::admin
