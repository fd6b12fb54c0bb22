#include "broker/bundle_ownership.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "broker/tenancy.h"
#include "common/logging.h"
#include "metadata/blocking.h"

namespace magnetar::broker {

using common::Result;
using common::Status;

namespace {

constexpr std::string_view kBundlesRoot = "/bundles";

// FNV-1a, then MurmurHash3's finalizer: stable across builds and machines
// (std::hash is not), and names that differ in their last character (the
// partitions of one topic) land far apart, which FNV-1a alone does not do
// for the high bits that choose the bundle.
uint32_t stable_hash32(std::string_view s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) {
    h ^= c;
    h *= 16777619u;
  }
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

}  // namespace

uint32_t topic_hash(const TopicName& topic) { return stable_hash32(topic.to_string()); }

std::string bundle_of(const TopicName& topic) {
  const uint64_t width = (uint64_t{1} << 32) / kBundlesPerNamespace;
  uint64_t index = topic_hash(topic) / width;
  uint64_t low = index * width;
  uint64_t high = index + 1 == kBundlesPerNamespace ? 0xffffffffu : low + width;
  return fmt::format("0x{:08x}_0x{:08x}", low, high);
}

BundleOwnership::BundleOwnership(metadata::Store& store, uint64_t self_node, Directory directory, Refresh refresh)
    : store_(store), self_node_(self_node), directory_(std::move(directory)), refresh_(std::move(refresh)) {}

std::string BundleOwnership::bundle_key(const TopicName& topic) {
  return fmt::format("{}/{}/{}/{}", kBundlesRoot, topic.ns.tenant, topic.ns.local, bundle_of(topic));
}

void BundleOwnership::remember(const std::string& key, const std::string& value) {
  uint64_t node = std::strtoull(value.c_str(), nullptr, 10);
  if (node == 0) return;
  std::lock_guard lock(mu_);
  owners_[key] = node;
}

Status BundleOwnership::start() {
  auto watched = store_.watch(std::string(kBundlesRoot) + "/", [this](const metadata::Event& event) {
    if (event.type == metadata::EventType::kDeleted) {
      std::lock_guard lock(mu_);
      owners_.erase(event.key);
      return;
    }
    store_.get(event.key, [this](Result<metadata::Record> record) {
      if (record.is_ok()) remember(record->key, record->value);
    });
  });
  if (!watched.is_ok()) return watched.status();
  watch_ = *watched;
  // Every assignment made before the watch: tenants, then namespaces, then bundles.
  auto tenants = metadata::blocking::list_children(store_, std::string(kBundlesRoot));
  if (!tenants.is_ok()) return tenants.status();
  size_t count = 0;
  for (const auto& tenant : *tenants) {
    std::string tenant_key = std::string(kBundlesRoot) + "/" + tenant;
    auto namespaces = metadata::blocking::list_children(store_, tenant_key);
    if (!namespaces.is_ok()) return namespaces.status();
    for (const auto& ns : *namespaces) {
      auto bundles = metadata::blocking::list_children(store_, tenant_key + "/" + ns);
      if (!bundles.is_ok()) return bundles.status();
      for (const auto& bundle : *bundles) {
        std::string key = tenant_key + "/" + ns + "/" + bundle;
        auto record = metadata::blocking::get(store_, key);
        if (record.is_ok()) {
          remember(key, record->value);
          count++;
        }
      }
    }
  }
  MLOG_INFO("ownership: {} bundles assigned in the cluster", count);
  return Status::ok();
}

void BundleOwnership::stop() {
  if (watch_ != 0) store_.unwatch(watch_);
  watch_ = 0;
}

Result<NodeEndpoints> BundleOwnership::endpoints_of(uint64_t id) const {
  for (auto& [node, alive] : directory_()) {
    if (node.node == id) {
      NodeEndpoints found = node;
      found.here = id == self_node_;
      return found;
    }
  }
  if (id == self_node_) {
    // This node, before it published its addresses: it needs none to serve here.
    NodeEndpoints here;
    here.node = id;
    return here;
  }
  return Status::unavailable("node " + std::to_string(id) + " owns it and has not published its addresses");
}

void BundleOwnership::resolve(uint64_t id, OwnerCallback done) {
  auto found = endpoints_of(id);
  if (found.is_ok() || !refresh_) return done(std::move(found));
  refresh_(id, [this, id, done]() { done(endpoints_of(id)); });
}

std::optional<NodeEndpoints> BundleOwnership::known_owner(const TopicName& topic) const {
  uint64_t owner = 0;
  {
    std::lock_guard lock(mu_);
    auto it = owners_.find(bundle_key(topic));
    if (it == owners_.end()) return std::nullopt;
    owner = it->second;
  }
  auto endpoints = endpoints_of(owner);
  if (!endpoints.is_ok()) return std::nullopt;
  return *endpoints;
}

void BundleOwnership::owner_of(const TopicName& topic, OwnerCallback done) {
  std::string key = bundle_key(topic);
  uint64_t owner = 0;
  {
    std::lock_guard lock(mu_);
    if (auto it = owners_.find(key); it != owners_.end()) owner = it->second;
  }
  if (owner != 0) return resolve(owner, std::move(done));
  store_.get(key, [this, key, hash = topic_hash(topic), ns = topic.ns, done](Result<metadata::Record> record) {
    if (record.is_ok()) {
      remember(key, record->value);
      return resolve(std::strtoull(record->value.c_str(), nullptr, 10), done);
    }
    if (record.status().code() != common::ErrorCode::kNotFound) return done(record.status());
    // Only a namespace that exists gets bundles: a lookup of an invented
    // namespace must not leave assignments behind.
    store_.get(namespace_key(ns), [this, key, hash, ns, done](Result<metadata::Record> exists) {
      if (!exists.is_ok()) {
        if (exists.status().code() != common::ErrorCode::kNotFound) return done(exists.status());
        return done(Status::not_found("namespace " + ns.to_string() + " does not exist"));
      }
      assign(key, hash, done);
    });
  });
}

void BundleOwnership::assign(const std::string& key, uint32_t hash, OwnerCallback done) {
  // The live node owning the fewest bundles; ties by the bundle's hash.
  std::map<uint64_t, size_t> load;
  if (serves_topics_) load[self_node_] = 0;
  for (auto& [node, alive] : directory_()) {
    if (alive && (node.node != self_node_ || serves_topics_)) load[node.node] = 0;
  }
  if (load.empty()) return done(Status::unavailable("no live node serves topics"));
  {
    std::lock_guard lock(mu_);
    for (const auto& [bundle, node] : owners_) {
      if (auto it = load.find(node); it != load.end()) it->second++;
    }
  }
  size_t fewest = SIZE_MAX;
  for (const auto& [node, count] : load) fewest = std::min(fewest, count);
  std::vector<uint64_t> candidates;
  for (const auto& [node, count] : load) {
    if (count == fewest) candidates.push_back(node);
  }
  uint64_t chosen = candidates[hash % candidates.size()];
  metadata::PutOptions create;
  create.expected_version = metadata::kMustNotExist;
  store_.put(key, std::to_string(chosen), create, [this, key, chosen, done](Result<metadata::Stat> put) {
    if (put.is_ok()) {
      remember(key, std::to_string(chosen));
      MLOG_INFO("ownership: bundle {} assigned to node {}", key, chosen);
      return done(endpoints_of(chosen));
    }
    if (put.status().code() != common::ErrorCode::kAlreadyExists) return done(put.status());
    // Another node assigned it first: its choice stands.
    store_.get(key, [this, key, done](Result<metadata::Record> record) {
      if (!record.is_ok()) return done(record.status());
      remember(key, record->value);
      resolve(std::strtoull(record->value.c_str(), nullptr, 10), done);
    });
  });
}

std::vector<NodeEndpoints> BundleOwnership::live_nodes() const {
  std::vector<NodeEndpoints> out;
  for (auto& [node, alive] : directory_()) {
    if (!alive) continue;
    NodeEndpoints n = node;
    n.here = n.node == self_node_;
    out.push_back(std::move(n));
  }
  return out;
}

std::vector<std::string> BundleOwnership::bundles_of(uint64_t node) const {
  std::vector<std::string> out;
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, owner] : owners_) {
      if (owner == node) out.push_back(key.substr(kBundlesRoot.size() + 1));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

NodeEndpoints BundleOwnership::self() const {
  auto endpoints = endpoints_of(self_node_);
  if (endpoints.is_ok()) return *endpoints;
  NodeEndpoints n;
  n.node = self_node_;
  return n;
}

}  // namespace magnetar::broker
