#include "server/node_directory.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "cluster/node.h"
#include "metadata/blocking.h"

namespace magnetar::server {

namespace {

constexpr std::string_view kNodesRoot = "/cluster/nodes";

uint64_t id_of_key(const std::string& key) {
  auto slash = key.rfind('/');
  return slash == std::string::npos ? 0 : std::strtoull(key.c_str() + slash + 1, nullptr, 10);
}

}  // namespace

void ClusterCalls::call(uint64_t node, uint16_t method, std::string payload, Done done) {
  cluster_.call(node, method, std::move(payload), std::move(done));
}

void ClusterCalls::handle(uint16_t method, Handler handler) { cluster_.handle(method, std::move(handler)); }

NodeDirectory::NodeDirectory(metadata::Store& store, cluster::ClusterNode& cluster)
    : store_(store), cluster_(cluster) {}

NodeDirectory::~NodeDirectory() { stop(); }

void NodeDirectory::stop() {
  if (watch_ != 0) store_.unwatch(watch_);
  watch_ = 0;
}

bool NodeDirectory::parse_record(uint64_t id, const std::string& json, broker::NodeEndpoints& out) {
  auto j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return false;
  auto roles = j.value("roles", std::vector<std::string>{});
  if (std::find(roles.begin(), roles.end(), "broker") == roles.end()) return false;
  out = broker::NodeEndpoints{};
  out.node = id;
  out.broker_id = j.value("brokerId", 0);
  out.pulsar_url = j.value("brokerServiceUrl", "");
  out.pulsar_tls_url = j.value("brokerServiceUrlTls", "");
  out.http_url = j.value("httpUrl", "");
  out.amqp_url = j.value("amqpUrl", "");
  std::string kafka = j.value("kafkaAddress", "");
  if (auto colon = kafka.rfind(':'); colon != std::string::npos) {
    out.kafka_host = kafka.substr(0, colon);
    out.kafka_port = std::atoi(kafka.c_str() + colon + 1);
  }
  return true;
}

void NodeDirectory::remember(const std::string& key, const std::string& value) {
  uint64_t id = id_of_key(key);
  broker::NodeEndpoints node;
  Storage storage;
  auto j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded() && j.is_object()) {
    auto roles = j.value("roles", std::vector<std::string>{"broker", "storage"});
    storage.stores = std::find(roles.begin(), roles.end(), "storage") != roles.end();
    storage.zone = j.value("zone", "");
    storage.group = j.value("storageGroup", "");
  }
  std::lock_guard lock(mu_);
  if (id != 0) published_[id] = value;
  if (id != 0) storage_[id] = storage;
  if (id != 0 && parse_record(id, value, node)) {
    records_[id] = std::move(node);
  } else {
    records_.erase(id);
  }
}

void NodeDirectory::refresh(uint64_t id, std::function<void()> done) {
  store_.get(std::string(kNodesRoot) + "/" + std::to_string(id),
             [this, done = std::move(done)](common::Result<metadata::Record> record) {
               if (record.is_ok()) remember(record->key, record->value);
               done();
             });
}

common::Status NodeDirectory::start() {
  auto watched = store_.watch(std::string(kNodesRoot) + "/", [this](const metadata::Event& event) {
    if (event.type == metadata::EventType::kDeleted) {
      std::lock_guard lock(mu_);
      records_.erase(id_of_key(event.key));
      published_.erase(id_of_key(event.key));
      storage_.erase(id_of_key(event.key));
      return;
    }
    store_.get(event.key, [this](common::Result<metadata::Record> record) {
      if (record.is_ok()) remember(record->key, record->value);
    });
  });
  if (!watched.is_ok()) return watched.status();
  watch_ = *watched;
  auto ids = metadata::blocking::list_children(store_, std::string(kNodesRoot));
  if (!ids.is_ok()) return ids.status();
  for (const auto& id : *ids) {
    std::string key = std::string(kNodesRoot) + "/" + id;
    auto record = metadata::blocking::get(store_, key);
    if (record.is_ok()) remember(key, record->value);
  }
  return common::Status::ok();
}

bool NodeDirectory::stores(uint64_t id) const {
  std::lock_guard lock(mu_);
  auto it = storage_.find(id);
  return it == storage_.end() || it->second.stores;
}

std::string NodeDirectory::group_of(uint64_t id) const {
  std::lock_guard lock(mu_);
  auto it = storage_.find(id);
  return it == storage_.end() ? std::string() : it->second.group;
}

std::string NodeDirectory::zone_of(uint64_t id) const {
  std::lock_guard lock(mu_);
  auto it = storage_.find(id);
  return it == storage_.end() ? std::string() : it->second.zone;
}

std::map<uint64_t, std::string> NodeDirectory::published() const {
  std::lock_guard lock(mu_);
  return published_;
}

std::vector<std::pair<broker::NodeEndpoints, bool>> NodeDirectory::nodes() const {
  std::vector<std::pair<broker::NodeEndpoints, bool>> out;
  auto members = cluster_.members();
  std::lock_guard lock(mu_);
  for (const auto& [id, node] : records_) {
    bool alive = false;
    bool member = false;
    for (const auto& m : members) {
      if (m.id != id) continue;
      member = true;
      alive = m.alive;
    }
    if (member) out.emplace_back(node, alive);
  }
  return out;
}

}  // namespace magnetar::server
