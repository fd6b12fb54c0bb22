// The storage nodes as an operator sees them: decommissioning one
// (/admin/v2/cluster/nodes/{id}/decommission) and the cluster's storage at a
// glance (/admin/v2/cluster/storage): what each node holds, the copies
// short, and what self-healing is doing.
#include <chrono>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "cluster/node.h"
#include "common/logging.h"
#include "metadata/blocking.h"
#include "replication/ledger_meta.h"
#include "server/node_directory.h"
#include "server/server.h"

namespace magnetar::server {

using common::Status;

namespace {

// One read of every ledger record: what names each node, and the copies
// named on nodes that are not live or are being decommissioned.
struct StorageScan {
  std::set<uint64_t> live;
  std::set<uint64_t> draining;
  struct Held {
    uint64_t fragments = 0;
    uint64_t ledgers = 0;
  };
  std::map<uint64_t, Held> held;
  uint64_t ledgers = 0;
  uint64_t short_copies = 0;
};

common::Result<StorageScan> scan_storage(cluster::ClusterNode& cluster, metadata::Store& store) {
  StorageScan scan;
  for (const auto& m : cluster.members()) {
    if (m.alive || m.id == cluster.id()) scan.live.insert(m.id);
  }
  auto names = metadata::blocking::list_children(store, replication::kDrainingPrefix);
  if (!names.is_ok()) return names.status();
  for (const std::string& name : *names) scan.draining.insert(std::strtoull(name.c_str(), nullptr, 10));
  auto ledgers = metadata::blocking::list_children(store, replication::kLedgersPrefix);
  if (!ledgers.is_ok()) return ledgers.status();
  for (const std::string& name : *ledgers) {
    auto rec = metadata::blocking::get(store, std::string(replication::kLedgersPrefix) + "/" + name);
    if (!rec.is_ok()) continue;  // deleted meanwhile
    auto meta = replication::decode_ledger_meta(rec->value);
    if (!meta.is_ok()) continue;
    ++scan.ledgers;
    std::set<uint64_t> holders;
    for (const replication::Fragment& f : meta->fragments) {
      for (uint64_t n : f.nodes) {
        scan.held[n].fragments++;
        holders.insert(n);
        if (scan.live.count(n) == 0 || scan.draining.count(n) != 0) ++scan.short_copies;
      }
    }
    for (uint64_t n : holders) scan.held[n].ledgers++;
  }
  return scan;
}

const char* node_state(const StorageScan& scan, uint64_t node) {
  if (scan.draining.count(node) == 0) return "active";
  auto it = scan.held.find(node);
  return it == scan.held.end() || it->second.fragments == 0 ? "drained" : "draining";
}

nlohmann::json healing_json(const replication::HealingStatus& s) {
  nlohmann::json j;
  j["healer"] = s.healer;
  j["updatedAt"] = s.updated_ms;
  j["underReplicatedFragments"] = s.underreplicated;
  j["healedFragments"] = s.healed_fragments;
  j["healedBytes"] = s.healed_bytes;
  j["rateLimitBytesPerSecond"] = s.rate_limit_bytes;
  j["copying"] = s.copying;
  if (s.copying) {
    const int64_t elapsed = std::max<int64_t>(1, s.updated_ms - s.started_ms);
    j["copy"] = {{"ledger", s.ledger},
                 {"firstEntry", s.first_entry},
                 {"lastEntry", s.last_entry},
                 {"nextEntry", s.next_entry},
                 {"fromNode", s.from_node},
                 {"toNode", s.to_node},
                 {"copiedBytes", s.copied_bytes},
                 {"startedAt", s.started_ms},
                 {"bytesPerSecond", s.copied_bytes * 1000 / static_cast<uint64_t>(elapsed)}};
  }
  return j;
}

}  // namespace

Status Server::set_draining(uint64_t node, bool drain) {
  if (!cluster_ || store_ == nullptr) {
    return Status::failed_precondition("a standalone node keeps the only copy of its ledgers: there is nothing to "
                                       "decommission it to");
  }
  bool member = false;
  for (const auto& m : cluster_->members()) member = member || m.id == node;
  if (!member) return Status::not_found("node " + std::to_string(node) + " is not a member of this cluster");
  const std::string key = replication::draining_key(node);
  if (!drain) {
    Status st = metadata::blocking::del(*store_, key);
    return st.code() == common::ErrorCode::kNotFound ? Status::ok() : st;
  }
  // The last storage node cannot leave: nothing could take its copies, nor a new ledger's.
  auto names = metadata::blocking::list_children(*store_, replication::kDrainingPrefix);
  if (!names.is_ok()) return names.status();
  std::set<uint64_t> draining;
  for (const std::string& name : *names) draining.insert(std::strtoull(name.c_str(), nullptr, 10));
  size_t staying = 0;
  for (const auto& m : cluster_->members()) {
    const bool self = m.id == cluster_->id();
    const bool stores = self ? config_.has_role("storage") : directory_ == nullptr || directory_->stores(m.id);
    if ((m.alive || self) && stores && m.id != node && draining.count(m.id) == 0) ++staying;
  }
  if (staying == 0 && draining.count(node) == 0) {
    return Status::failed_precondition("node " + std::to_string(node) + " is the last storage node left: no other "
                                       "could take its copies or a new ledger's");
  }
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  metadata::PutOptions create;
  create.expected_version = metadata::kMustNotExist;
  auto put = metadata::blocking::put(*store_, key, std::to_string(now), create);
  if (!put.is_ok() && put.status().code() != common::ErrorCode::kAlreadyExists) return put.status();
  if (put.is_ok()) MLOG_INFO("cluster: storage node {} is being decommissioned", node);
  return Status::ok();
}

common::Result<nlohmann::json> Server::storage_status(uint64_t node) const {
  if (!cluster_ || store_ == nullptr) {
    return Status::failed_precondition("a standalone node has no storage nodes to decommission");
  }
  bool member = false;
  for (const auto& m : cluster_->members()) member = member || m.id == node;
  if (!member) return Status::not_found("node " + std::to_string(node) + " is not a member of this cluster");
  auto scan = scan_storage(*cluster_, *store_);
  if (!scan.is_ok()) return scan.status();
  const StorageScan::Held held = scan->held.count(node) != 0 ? scan->held.at(node) : StorageScan::Held{};
  nlohmann::json j;
  j["id"] = node;
  j["alive"] = scan->live.count(node) != 0;
  j["state"] = node_state(*scan, node);
  j["fragments"] = held.fragments;
  j["ledgers"] = held.ledgers;
  j["underReplicatedFragments"] = scan->short_copies;
  return j;
}

common::Result<nlohmann::json> Server::storage_overview() const {
  if (!cluster_ || store_ == nullptr) {
    return Status::failed_precondition("a standalone node keeps one copy of each ledger in its own storage; "
                                       "replicated storage runs in a cluster");
  }
  auto scan = scan_storage(*cluster_, *store_);
  if (!scan.is_ok()) return scan.status();
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& m : cluster_->members()) {
    const bool self = m.id == cluster_->id();
    const bool stores = self ? config_.has_role("storage") : directory_ == nullptr || directory_->stores(m.id);
    const StorageScan::Held held = scan->held.count(m.id) != 0 ? scan->held.at(m.id) : StorageScan::Held{};
    if (!stores && held.fragments == 0) continue;
    nlohmann::json n;
    n["id"] = m.id;
    n["alive"] = scan->live.count(m.id) != 0;
    n["zone"] = self ? config_.zone : directory_ == nullptr ? std::string() : directory_->zone_of(m.id);
    n["state"] = node_state(*scan, m.id);
    n["fragments"] = held.fragments;
    n["ledgers"] = held.ledgers;
    nodes.push_back(std::move(n));
  }
  nlohmann::json j;
  j["ledgers"] = scan->ledgers;
  j["underReplicatedFragments"] = scan->short_copies;
  j["storageNodes"] = std::move(nodes);
  auto healing = metadata::blocking::get(*store_, replication::kHealingKey);
  if (healing.is_ok()) {
    auto decoded = replication::decode_healing(healing->value);
    j["healing"] = decoded.is_ok() ? healing_json(*decoded) : nlohmann::json();
  } else if (healing.status().code() == common::ErrorCode::kNotFound) {
    j["healing"] = nullptr;
  } else {
    return healing.status();
  }
  return j;
}

}  // namespace magnetar::server
