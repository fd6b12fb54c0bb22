#include "broker/bundle_ownership.h"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <map>

#include "broker/bundle_layout.h"
#include "broker/tenancy.h"
#include "cluster/rpc_format.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "metadata/blocking.h"
#include "runtime/reactor.h"
#include "runtime/timer.h"

namespace magnetar::broker {

using common::Result;
using common::Status;

namespace {

constexpr std::string_view kBundlesRoot = "/bundles";
constexpr auto kReleaseMethod = static_cast<uint16_t>(cluster::rpc::Method::kReleaseBundle);
constexpr auto kSplitMethod = static_cast<uint16_t>(cluster::rpc::Method::kSplitBundle);
// Moves started by one failover pass; the rest wait for the next second.
constexpr size_t kMovesPerPass = 256;

// "tenant/namespace" of a bundle key "/bundles/tenant/namespace/range".
std::string namespace_of_key(const std::string& key) {
  std::string rest = key.substr(kBundlesRoot.size() + 1);
  return rest.substr(0, rest.rfind('/'));
}

common::Counter& bundle_moves(const std::string& reason) {
  return common::MetricsRegistry::global().counter(
      "magnetar_bundle_moves_total", "Bundles this node moved to another owner, by why", {{"reason", reason}});
}

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
  const auto shared = layout(topic.ns);
  const Boundaries& b = *shared;
  const uint32_t hash = topic_hash(topic);
  // The first boundary above the hash ends its bundle; 0xffffffff falls in the last one.
  auto above = std::upper_bound(b.begin(), b.end(), hash);
  if (above == b.end()) above = std::prev(b.end());
  return range_name(*std::prev(above), *above);
}

std::vector<std::string> namespace_bundles(const NamespaceName& ns) {
  const Boundaries b = layout_of(ns);
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < b.size(); ++i) out.push_back(range_name(b[i], b[i + 1]));
  return out;
}

std::string bundle_owners_key(const NamespaceName& ns) {
  return fmt::format("{}/{}/{}", kBundlesRoot, ns.tenant, ns.local);
}

std::string qualified_bundle(const TopicName& topic) {
  return fmt::format("{}/{}/{}", topic.ns.tenant, topic.ns.local, bundle_of(topic));
}

BundleOwnership::BundleOwnership(metadata::Store& store, uint64_t self_node, Directory directory, Refresh refresh)
    : store_(store), self_node_(self_node), directory_(std::move(directory)), refresh_(std::move(refresh)) {
  guard_->self = this;
}

BundleOwnership::~BundleOwnership() {
  std::lock_guard lock(guard_->mu);
  guard_->self = nullptr;
}

std::string BundleOwnership::bundle_key(const TopicName& topic) {
  return std::string(kBundlesRoot) + "/" + qualified_bundle(topic);
}

void BundleOwnership::remember(const std::string& key, const std::string& value, int64_t version) {
  uint64_t node = std::strtoull(value.c_str(), nullptr, 10);
  if (node == 0) return;
  bool taken_away = false;
  {
    std::lock_guard lock(mu_);
    Assignment& known = owners_[key];
    if (version < known.version) return;  // an older read that answered late
    taken_away = known.node == self_node_ && node != self_node_;
    known.node = node;
    known.version = version;
  }
  if (taken_away) lost(key);
}

void BundleOwnership::announce(const std::string& key, int64_t version) {
  std::lock_guard lock(mu_);
  auto it = owners_.find(key);
  if (it != owners_.end()) it->second.announced = std::max(it->second.announced, version);
}

void BundleOwnership::forget(const std::string& key) {
  bool was_here = false;
  {
    std::lock_guard lock(mu_);
    auto it = owners_.find(key);
    if (it == owners_.end()) return;
    was_here = it->second.node == self_node_;
    owners_.erase(it);
  }
  if (was_here) lost(key);
}

void BundleOwnership::doubt(const TopicName& topic) {
  const std::string key = bundle_key(topic);
  {
    std::lock_guard lock(mu_);
    auto it = owners_.find(key);
    if (it == owners_.end() || it->second.node != self_node_) return;  // not named this node's: nothing stale
    owners_.erase(it);  // no answer until the store's: lookups read it meanwhile
  }
  auto guard = guard_;
  store_.get(key, [guard, key](Result<metadata::Record> record) {
    std::lock_guard lock(guard->mu);
    BundleOwnership* self = guard->self;
    if (self == nullptr || !record.is_ok()) return;  // unreachable: the next lookup reads it
    const uint64_t node = std::strtoull(record->value.c_str(), nullptr, 10);
    self->remember(key, record->value, record->stat.version);
    // remember() cannot tell that it was this node's (the entry was dropped);
    // a newer answer that came meanwhile has the last word.
    bool elsewhere = false;
    {
      std::lock_guard names(self->mu_);
      auto it = self->owners_.find(key);
      elsewhere = node != self->self_node_ && it != self->owners_.end() && it->second.node == node;
    }
    if (elsewhere) self->lost(key);
  });
}

void BundleOwnership::lost(const std::string& key) {
  // Also after a release of this node's own: a topic that was loading
  // while it closed the others goes now.
  if (!unloader_) return;
  std::string bundle = key.substr(kBundlesRoot.size() + 1);
  bool releasing = false;
  {
    std::lock_guard lock(mu_);
    releasing = releasing_.count(key) != 0;
  }
  if (split_away(key)) {
    // Split: its topics fall in the pieces now; those of pieces owned
    // elsewhere go (none, when this node split it).
    auto name = parse_bundle(bundle);
    if (!name.is_ok()) return;
    const auto shared = layout(name->ns);
    const Boundaries& b = *shared;
    for (size_t i = 0; i + 1 < b.size(); ++i) {
      if (b[i] < name->low || b[i + 1] > name->high) continue;
      std::string piece = name->ns.to_string() + "/" + range_name(b[i], b[i + 1]);
      uint64_t owner = 0;
      {
        std::lock_guard lock(mu_);
        auto it = owners_.find(std::string(kBundlesRoot) + "/" + piece);
        if (it != owners_.end()) owner = it->second.node;
      }
      if (owner == self_node_) continue;
      MLOG_WARN("ownership: bundle {} was split; its piece {} is not served here: closing its topics", bundle, piece);
      unloader_(piece, []() {});
    }
    return;
  }
  if (!releasing) MLOG_WARN("ownership: bundle {} served here now belongs to another node: closing its topics", bundle);
  unloader_(bundle, []() {});
}

bool BundleOwnership::split_away(const std::string& key) {
  auto name = parse_bundle(std::string_view(key).substr(kBundlesRoot.size() + 1));
  if (!name.is_ok()) return false;
  // Both ends are boundaries with another between them: the layout cut it.
  // (A piece whose layout is not written yet has an end that is no boundary.)
  const auto shared = layout(name->ns);
  const Boundaries& b = *shared;
  auto low = std::lower_bound(b.begin(), b.end(), name->low);
  auto high = std::lower_bound(b.begin(), b.end(), name->high);
  return low != b.end() && high != b.end() && *low == name->low && *high == name->high && high - low > 1;
}

Status BundleOwnership::start() {
  // A watch's read may answer after stop(): it reaches this object only
  // through the guard, under its lock, while the guard says it is there.
  auto guard = guard_;
  metadata::Store* store = &store_;
  auto watched = store_.watch(std::string(kBundlesRoot) + "/", [guard, store](const metadata::Event& event) {
    if (event.type == metadata::EventType::kDeleted) {
      std::lock_guard lock(guard->mu);
      if (guard->self != nullptr) guard->self->forget(event.key);
      return;
    }
    {
      std::lock_guard lock(guard->mu);
      if (guard->self != nullptr) guard->self->announce(event.key, event.version);
    }
    store->get(event.key, [guard](Result<metadata::Record> record) {
      std::lock_guard lock(guard->mu);
      if (guard->self != nullptr && record.is_ok()) {
        guard->self->remember(record->key, record->value, record->stat.version);
      }
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
          remember(key, record->value, record->stat.version);
          count++;
        }
      }
    }
  }
  MLOG_INFO("ownership: {} bundles assigned in the cluster", count);
  if (!cluster_.empty()) {
    auto isolation = store_.watch(isolation_prefix(cluster_) + "/", [guard](const metadata::Event&) {
      std::lock_guard lock(guard->mu);
      if (guard->self != nullptr) guard->self->reload_isolation();
    });
    if (!isolation.is_ok()) return isolation.status();
    isolation_watch_ = *isolation;
    std::map<std::string, IsolationPolicy> policies;
    auto names = metadata::blocking::list_children(store_, isolation_prefix(cluster_));
    if (names.is_ok()) {
      for (const auto& name : *names) {
        auto record = metadata::blocking::get(store_, isolation_key(cluster_, name));
        if (!record.is_ok()) continue;
        if (auto p = decode_isolation(record->value); p.is_ok()) policies.emplace(name, *p);
      }
    }
    std::lock_guard lock(mu_);
    isolation_ = std::make_shared<IsolationRules>(policies);
  }
  if (calls_ != nullptr) {
    // payload: "<tenant>/<namespace>/<range>\n<destination node, 0 for any>"; reply: "" or why not.
    calls_->handle(kReleaseMethod, [this](std::string_view payload, RemoteCalls::Reply reply) {
      auto newline = payload.find('\n');
      if (newline == std::string_view::npos) return reply("malformed bundle release");
      std::string bundle(payload.substr(0, newline));
      uint64_t destination = std::strtoull(std::string(payload.substr(newline + 1)).c_str(), nullptr, 10);
      bundle_moves("unload").inc();
      release(bundle, destination, [reply](Status st) { reply(st.is_ok() ? std::string() : st.message()); });
    });
    calls_->handle(kSplitMethod, [this](std::string_view payload, RemoteCalls::Reply reply) {
      // "bundle\nunload(0|1)\nposition,position..."
      auto first = payload.find('\n');
      auto second = first == std::string_view::npos ? first : payload.find('\n', first + 1);
      if (second == std::string_view::npos) return reply("malformed bundle split");
      std::string bundle(payload.substr(0, first));
      const bool unload = payload.substr(first + 1, second - first - 1) == "1";
      std::vector<uint32_t> positions;
      std::string_view rest = payload.substr(second + 1);
      while (!rest.empty()) {
        size_t comma = rest.find(',');
        const std::string position(rest.substr(0, comma));
        positions.push_back(static_cast<uint32_t>(std::strtoul(position.c_str(), nullptr, 10)));
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      }
      split_here(bundle, std::move(positions), unload,
                 [reply](Status st) { reply(st.is_ok() ? std::string() : st.message()); });
    });
  }
  if (reactor_ != nullptr && serves_topics_) {
    reactor_->run_sync([this]() {
      pass_timer_ = std::make_unique<runtime::Timer>(*reactor_);
      pass_timer_->every(std::chrono::seconds(1), [this]() { failover_pass(); });
    });
  }
  return Status::ok();
}

void BundleOwnership::reload_isolation() {
  const uint64_t read = ++isolation_reads_;
  auto guard = guard_;
  store_.list_children(isolation_prefix(cluster_), [this, guard, read](Result<std::vector<std::string>> names) {
    {
      std::lock_guard lock(guard->mu);
      if (guard->self == nullptr) return;
    }
    struct Gather {
      std::mutex mu;
      size_t left = 0;
      std::map<std::string, IsolationPolicy> policies;
    };
    auto g = std::make_shared<Gather>();
    auto apply = [this, guard, read, g]() {
      std::lock_guard alive(guard->mu);
      if (guard->self == nullptr || read != isolation_reads_.load()) return;  // stopped, or a later read will apply
      auto rules = std::make_shared<IsolationRules>(g->policies);
      std::lock_guard lock(mu_);
      isolation_ = std::move(rules);
      MLOG_INFO("ownership: {} namespace isolation policies in force", g->policies.size());
    };
    if (!names.is_ok() || names->empty()) return apply();
    g->left = names->size();
    for (const auto& name : *names) {
      store_.get(isolation_key(cluster_, name), [g, name, apply](Result<metadata::Record> record) {
        bool last = false;
        {
          std::lock_guard lock(g->mu);
          if (record.is_ok()) {
            if (auto p = decode_isolation(record->value); p.is_ok()) g->policies.emplace(name, *p);
          }
          last = --g->left == 0;
        }
        if (last) apply();
      });
    }
  });
}

void BundleOwnership::stop() {
  if (isolation_watch_ != 0) store_.unwatch(isolation_watch_);
  isolation_watch_ = 0;
  {
    std::lock_guard lock(guard_->mu);
    guard_->self = nullptr;
  }
  if (pass_timer_) reactor_->run_sync([this]() { pass_timer_.reset(); });
  if (watch_ != 0) store_.unwatch(watch_);
  watch_ = 0;
}

std::shared_ptr<const BundleOwnership::Nodes> BundleOwnership::nodes(bool fresh) const {
  const int64_t now = common::monotonic_ms();
  {
    std::lock_guard lock(nodes_mu_);
    if (!fresh && nodes_ && now - nodes_at_ms_ < directory_max_age_.count()) return nodes_;
  }
  auto read = std::make_shared<const Nodes>(directory_());
  std::lock_guard lock(nodes_mu_);
  nodes_ = read;
  nodes_at_ms_ = now;
  return read;
}

Result<NodeEndpoints> BundleOwnership::endpoints_of(uint64_t id, bool fresh) const {
  for (auto& [node, alive] : *nodes(fresh)) {
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
  refresh_(id, [this, id, done]() { done(endpoints_of(id, /*fresh=*/true)); });
}

bool BundleOwnership::alive(uint64_t node, bool fresh) const {
  if (node == self_node_) return true;
  for (auto& [endpoints, live] : *nodes(fresh)) {
    if (endpoints.node == node) return live;
  }
  return false;
}

bool BundleOwnership::movable(uint64_t node) const {
  if (node == self_node_ || !may_move()) return false;
  // A node the cached directory calls dead is looked up again afresh, after
  // the lease check: a member back from a cut counts everyone dead until the
  // leader answers it, and a view cached just before that answer renewed its
  // lease would move live members' bundles (seen: a healed member took its
  // old bundle back 47 ms after its lease was renewed). A live owner, the
  // lookups' usual case, costs no fresh read.
  return movable_given(node, alive(node) || alive(node, /*fresh=*/true));
}

bool BundleOwnership::movable_given(uint64_t node, bool node_alive) const {
  if (node_alive) {
    std::lock_guard lock(mu_);
    if (!dead_since_ms_.empty()) dead_since_ms_.erase(node);
    return false;
  }
  if (failover_after_.count() == 0) return true;
  int64_t now = common::monotonic_ms();
  std::lock_guard lock(mu_);
  auto [it, first] = dead_since_ms_.emplace(node, now);
  return now - it->second >= failover_after_.count();
}

std::optional<NodeEndpoints> BundleOwnership::known_owner(const TopicName& topic) const {
  uint64_t owner = 0;
  {
    std::lock_guard lock(mu_);
    auto it = owners_.find(bundle_key(topic));
    if (it == owners_.end() || !it->second.current()) return std::nullopt;
    owner = it->second.node;
  }
  if (owner == self_node_) {
    auto endpoints = endpoints_of(owner);
    return endpoints.is_ok() ? std::optional<NodeEndpoints>(*endpoints) : std::nullopt;
  }
  // One look at the directory (this is on every call's path): its
  // addresses, and whether it is alive; a dead owner is not an answer
  // (owner_of() moves its bundle).
  for (auto& [node, node_alive] : *nodes()) {
    if (node.node != owner) continue;
    if (may_move() && movable_given(owner, node_alive)) return std::nullopt;
    NodeEndpoints found = node;
    found.here = false;
    return found;
  }
  return std::nullopt;
}

void BundleOwnership::owner_of(const TopicName& topic, OwnerCallback done) {
  std::string key = bundle_key(topic);
  Assignment known;
  {
    std::lock_guard lock(mu_);
    if (auto it = owners_.find(key); it != owners_.end() && it->second.current()) known = it->second;
  }
  if (known.node != 0) {
    if (!movable(known.node)) return resolve(known.node, std::move(done));
    return take_over(key, known.node, known.version, std::move(done));
  }
  store_.get(key, [this, key, hash = topic_hash(topic), topic, done](Result<metadata::Record> record) {
    if (record.is_ok()) {
      remember(key, record->value, record->stat.version);
      uint64_t node = std::strtoull(record->value.c_str(), nullptr, 10);
      if (movable(node)) return take_over(key, node, record->stat.version, done);
      return resolve(node, done);
    }
    if (record.status().code() != common::ErrorCode::kNotFound) return done(record.status());
    // Only a namespace that exists gets bundles: a lookup of an invented
    // namespace must not leave assignments behind.
    store_.get(namespace_key(topic.ns), [this, key, hash, topic, done](Result<metadata::Record> exists) {
      if (!exists.is_ok()) {
        if (exists.status().code() != common::ErrorCode::kNotFound) return done(exists.status());
        return done(Status::not_found("namespace " + topic.ns.to_string() + " does not exist"));
      }
      // The layout afresh: a split this node has not heard of yet must not
      // bring its old bundle back.
      store_.get(layout_key(topic.ns), [this, key, hash, topic, done](Result<metadata::Record> layout) {
        if (layout.is_ok()) {
          auto stored = decode_boundaries(layout->value);
          if (stored.is_ok() && *stored != layout_of(topic.ns)) {
            set_layout(topic.ns.to_string(), std::move(*stored));
            if (bundle_key(topic) != key) return owner_of(topic, done);
          }
        } else if (layout.status().code() != common::ErrorCode::kNotFound) {
          return done(layout.status());
        }
        assign(key, hash, done);
      });
    });
  });
}

std::vector<uint64_t> BundleOwnership::allowed_for(const std::string& key, uint64_t excluded) const {
  std::vector<NodeEndpoints> live;
  bool self_listed = false;
  for (auto& [node, is_alive] : *nodes()) {
    if (!is_alive || node.node == excluded) continue;
    if (node.node == self_node_) {
      if (!serves_topics_) continue;
      self_listed = true;
    }
    live.push_back(node);
  }
  if (serves_topics_ && !self_listed && self_node_ != excluded) {
    NodeEndpoints here;
    here.node = self_node_;
    live.push_back(here);
  }
  std::shared_ptr<const IsolationRules> rules;
  {
    std::lock_guard lock(mu_);
    rules = isolation_;
  }
  if (rules->empty()) {
    std::vector<uint64_t> all;
    for (const auto& n : live) all.push_back(n.node);
    return all;
  }
  return rules->allowed(namespace_of_key(key), live);
}

std::vector<uint64_t> BundleOwnership::allowed_brokers(const std::string& bundle) const {
  return allowed_for(std::string(kBundlesRoot) + "/" + bundle, 0);
}

uint64_t BundleOwnership::least_loaded(const std::string& key, uint32_t hash, uint64_t excluded) const {
  std::map<uint64_t, size_t> load;
  for (uint64_t node : allowed_for(key, excluded)) load[node] = 0;
  if (load.empty()) return 0;
  {
    std::lock_guard lock(mu_);
    for (const auto& [bundle, owner] : owners_) {
      if (auto it = load.find(owner.node); it != load.end()) it->second++;
    }
  }
  size_t fewest = SIZE_MAX;
  for (const auto& [node, count] : load) fewest = std::min(fewest, count);
  std::vector<uint64_t> candidates;
  for (const auto& [node, count] : load) {
    if (count == fewest) candidates.push_back(node);
  }
  return candidates[hash % candidates.size()];
}

void BundleOwnership::assign(const std::string& key, uint32_t hash, OwnerCallback done) {
  uint64_t chosen = least_loaded(key, hash, 0);
  if (chosen == 0) return done(Status::unavailable("no live node may serve " + namespace_of_key(key)));
  metadata::PutOptions create;
  create.expected_version = metadata::kMustNotExist;
  store_.put(key, std::to_string(chosen), create, [this, key, chosen, done](Result<metadata::Stat> put) {
    if (put.is_ok()) {
      remember(key, std::to_string(chosen), put->version);
      MLOG_INFO("ownership: bundle {} assigned to node {}", key, chosen);
      return done(endpoints_of(chosen));
    }
    if (put.status().code() != common::ErrorCode::kAlreadyExists) return done(put.status());
    // Another node assigned it first: its choice stands.
    store_.get(key, [this, key, done](Result<metadata::Record> record) {
      if (!record.is_ok()) return done(record.status());
      remember(key, record->value, record->stat.version);
      resolve(std::strtoull(record->value.c_str(), nullptr, 10), done);
    });
  });
}

void BundleOwnership::take_over(const std::string& key, uint64_t from, int64_t version, OwnerCallback done) {
  uint64_t to = least_loaded(key, stable_hash32(key), from);
  if (to == 0) {
    return done(Status::unavailable("node " + std::to_string(from) + " owns it and is not alive; no live node "
                                    "can take it"));
  }
  bundle_moves("failover").inc();
  move(key, version, to, "node " + std::to_string(from) + " is not alive", std::move(done));
}

void BundleOwnership::move(const std::string& key, int64_t version, uint64_t to, const std::string& why,
                           OwnerCallback done) {
  metadata::PutOptions cas;
  cas.expected_version = version;
  store_.put(key, std::to_string(to), cas, [this, key, to, why, done](Result<metadata::Stat> put) {
    if (put.is_ok()) {
      MLOG_INFO("ownership: bundle {} moved to node {}: {}", key.substr(kBundlesRoot.size() + 1), to, why);
      remember(key, std::to_string(to), put->version);
      return resolve(to, done);
    }
    // Another node moved it first (or it is gone): what stands now.
    store_.get(key, [this, key, done](Result<metadata::Record> record) {
      if (!record.is_ok()) return done(record.status());
      remember(key, record->value, record->stat.version);
      resolve(std::strtoull(record->value.c_str(), nullptr, 10), done);
    });
  });
}

void BundleOwnership::failover_pass() {
  if (!serves_topics_ || !may_move()) return;
  auto directory = nodes(/*fresh=*/true);  // as movable(): read after the lease check
  std::unordered_set<uint64_t> live{self_node_};
  for (auto& [endpoints, is_alive] : *directory) {
    if (!is_alive) continue;
    // The live broker with the lowest id moves the bundles; the others
    // would only lose the compare-and-set to it.
    if (endpoints.node < self_node_) return;
    live.insert(endpoints.node);
  }
  std::unordered_set<uint64_t> owners;
  std::vector<std::pair<std::string, int64_t>> split;
  const bool layouts_split = any_split();
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, owner] : owners_) {
      if (layouts_split && split_away(key)) {
        // Left by a split that stopped before it deleted it.
        if (taking_over_.insert(key).second) split.emplace_back(key, owner.version);
        continue;
      }
      if (live.count(owner.node) == 0) owners.insert(owner.node);
    }
  }
  for (const auto& [key, version] : split) {
    MLOG_INFO("ownership: deleting bundle {}, split since", key.substr(kBundlesRoot.size() + 1));
    store_.del(key, version, [this, key = key](Status) {
      std::lock_guard lock(mu_);
      taking_over_.erase(key);
    });
  }
  std::unordered_set<uint64_t> dead;
  for (uint64_t node : owners) {
    if (movable(node)) dead.insert(node);
  }
  std::vector<std::pair<std::string, Assignment>> orphans;
  if (!dead.empty()) {
    std::lock_guard lock(mu_);
    for (const auto& [key, owner] : owners_) {
      if (dead.count(owner.node) == 0 || taking_over_.count(key) != 0 || (layouts_split && split_away(key))) continue;
      orphans.emplace_back(key, owner);
      taking_over_.insert(key);
      if (orphans.size() == kMovesPerPass) break;
    }
  }
  for (auto& [key, owner] : orphans) {
    take_over(key, owner.node, owner.version, [this, key = key](Result<NodeEndpoints>) {
      std::lock_guard lock(mu_);
      taking_over_.erase(key);
    });
  }
  move_misplaced(live);
}

void BundleOwnership::move_misplaced(const std::unordered_set<uint64_t>& live) {
  {
    std::lock_guard lock(mu_);
    if (isolation_->empty()) return;
  }
  std::vector<std::pair<std::string, uint64_t>> owned;
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, owner] : owners_) {
      if (live.count(owner.node) != 0 && taking_over_.count(key) == 0) owned.emplace_back(key, owner.node);
    }
  }
  std::map<std::string, std::vector<uint64_t>> allowed;  // by namespace, for this pass
  std::vector<std::string> misplaced;
  for (const auto& [key, node] : owned) {
    std::string ns = namespace_of_key(key);
    auto it = allowed.find(ns);
    if (it == allowed.end()) it = allowed.emplace(ns, allowed_for(key, 0)).first;
    // Nowhere allowed is alive: it stays rather than go dark.
    if (it->second.empty() || std::find(it->second.begin(), it->second.end(), node) != it->second.end()) continue;
    misplaced.push_back(key);
    if (misplaced.size() == kMovesPerPass) break;
  }
  for (const auto& key : misplaced) {
    {
      std::lock_guard lock(mu_);
      taking_over_.insert(key);
    }
    std::string bundle = key.substr(kBundlesRoot.size() + 1);
    MLOG_INFO("ownership: bundle {} is on a broker its namespace's isolation policy does not allow: moving it", bundle);
    bundle_moves("isolation").inc();
    unload(bundle, 0, [this, key, bundle](Status st) {
      if (!st.is_ok()) MLOG_WARN("ownership: moving bundle {}: {}", bundle, st.to_string());
      std::lock_guard lock(mu_);
      taking_over_.erase(key);
    });
  }
}

bool BundleOwnership::releasing(const TopicName& topic) const {
  std::lock_guard lock(mu_);
  return !releasing_.empty() && releasing_.count(bundle_key(topic)) != 0;
}

void BundleOwnership::release(const std::string& bundle, uint64_t destination, std::function<void(Status)> done) {
  std::string key = std::string(kBundlesRoot) + "/" + bundle;
  int64_t version = 0;
  {
    std::lock_guard lock(mu_);
    auto it = owners_.find(key);
    if (it == owners_.end() || it->second.node != self_node_) {
      return done(Status::failed_precondition("bundle " + bundle + " is not owned by node " +
                                              std::to_string(self_node_)));
    }
    if (releasing_.count(key) != 0) {
      return done(Status::failed_precondition("bundle " + bundle + " is already being handed over"));
    }
    version = it->second.version;
  }
  if (destination != 0 && destination != self_node_ && !alive(destination)) {
    return done(Status::invalid_argument("node " + std::to_string(destination) + " is not a live broker"));
  }
  if (destination != 0) {
    auto allowed = allowed_for(key, 0);
    if (std::find(allowed.begin(), allowed.end(), destination) == allowed.end()) {
      return done(Status::invalid_argument("node " + std::to_string(destination) + " may not serve " +
                                           namespace_of_key(key) + " (namespace isolation policies)"));
    }
  }
  uint64_t to = destination != 0 ? destination : least_loaded(key, stable_hash32(key), self_node_);
  if (to == self_node_) {
    // Unloaded, and served here again from the next lookup, as Pulsar's unload to the same broker.
    if (!unloader_) return done(Status::ok());
    return unloader_(bundle, [done]() { done(Status::ok()); });
  }
  if (to == 0) return done(Status::unavailable("no other live broker can take bundle " + bundle));
  {
    std::lock_guard lock(mu_);
    releasing_.insert(key);
  }
  auto hand = [this, key, bundle, version, to, done]() {
    move(key, version, to, "handed over by node " + std::to_string(self_node_),
         [this, key, done](Result<NodeEndpoints> owner) {
           bool still_here = false;
           {
             std::lock_guard lock(mu_);
             releasing_.erase(key);
             auto it = owners_.find(key);
             still_here = it != owners_.end() && it->second.node == self_node_;
           }
           if (!owner.is_ok()) return done(owner.status());
           if (still_here) return done(Status::unavailable("bundle " + key + " could not be handed over"));
           done(Status::ok());
         });
  };
  if (!unloader_) return hand();
  unloader_(bundle, std::move(hand));
}

void BundleOwnership::unload(const std::string& bundle, uint64_t destination, std::function<void(Status)> done) {
  std::string key = std::string(kBundlesRoot) + "/" + bundle;
  Assignment known;
  {
    std::lock_guard lock(mu_);
    if (auto it = owners_.find(key); it != owners_.end()) known = it->second;
  }
  if (known.node == 0) return done(Status::ok());  // nobody serves it: nothing to unload
  if (known.node == self_node_) {
    bundle_moves("unload").inc();
    return release(bundle, destination, std::move(done));
  }
  if (!alive(known.node)) {
    if (!may_move()) return done(Status::unavailable("this node's view of the cluster is not current"));
    // An operator's unload moves a dead owner's bundle at once, whatever the failover delay.
    uint64_t to = destination != 0 ? destination : least_loaded(key, stable_hash32(key), known.node);
    if (to == 0 || !alive(to)) return done(Status::unavailable("no live broker can take bundle " + bundle));
    bundle_moves("failover").inc();
    return move(key, known.version, to, "unloaded from node " + std::to_string(known.node) + ", not alive",
                [done](Result<NodeEndpoints> owner) { done(owner.is_ok() ? Status::ok() : owner.status()); });
  }
  if (calls_ == nullptr) return done(Status::unavailable("cannot reach node " + std::to_string(known.node)));
  calls_->call(known.node, kReleaseMethod, bundle + "\n" + std::to_string(destination),
               [done](Result<std::string> reply) {
                 if (!reply.is_ok()) return done(reply.status());
                 if (!reply->empty()) return done(Status::failed_precondition(*reply));
                 done(Status::ok());
               });
}

void BundleOwnership::split(const std::string& bundle, std::vector<uint32_t> positions, bool unload,
                            std::function<void(Status)> done) {
  // Checked here first, so a bad request is answered without a call to the owner.
  if (auto plan = plan_split(bundle, positions); !plan.is_ok()) return done(plan.status());
  uint64_t owner = 0;
  {
    std::lock_guard lock(mu_);
    if (auto it = owners_.find(std::string(kBundlesRoot) + "/" + bundle); it != owners_.end()) owner = it->second.node;
  }
  if (owner == 0 || owner == self_node_) return split_here(bundle, std::move(positions), unload, std::move(done));
  if (!alive(owner)) {
    return done(Status::unavailable("bundle " + bundle + " belongs to node " + std::to_string(owner) +
                                    ", which is not alive; split it once it has moved"));
  }
  if (calls_ == nullptr) return done(Status::unavailable("cannot reach node " + std::to_string(owner)));
  std::string payload = bundle + "\n" + (unload ? "1" : "0") + "\n";
  for (size_t i = 0; i < positions.size(); ++i) payload += (i == 0 ? "" : ",") + std::to_string(positions[i]);
  calls_->call(owner, kSplitMethod, std::move(payload), [done](Result<std::string> reply) {
    if (!reply.is_ok()) return done(reply.status());
    if (!reply->empty()) return done(Status::failed_precondition(*reply));
    done(Status::ok());
  });
}

void BundleOwnership::split_here(const std::string& bundle, std::vector<uint32_t> positions, bool unload,
                                 std::function<void(Status)> done) {
  auto plan = plan_split(bundle, positions);
  if (!plan.is_ok()) return done(plan.status());
  const std::string key = std::string(kBundlesRoot) + "/" + bundle;
  bool owned_here = false;
  int64_t version = 0;
  {
    std::lock_guard lock(mu_);
    if (auto it = owners_.find(key); it != owners_.end()) {
      if (it->second.node != self_node_) {
        return done(Status::failed_precondition("bundle " + bundle + " belongs to node " +
                                                std::to_string(it->second.node)));
      }
      owned_here = true;
      version = it->second.version;
    }
    if (releasing_.count(key) != 0) {
      return done(Status::failed_precondition("bundle " + bundle + " is being handed over or split"));
    }
    // Its topics wait (retriably) while it is cut.
    if (owned_here) releasing_.insert(key);
  }
  const std::vector<std::string>& pieces = plan->pieces;
  struct Split {
    std::mutex mu;
    size_t left = 0;
    Status failure = Status::ok();
  };
  auto state = std::make_shared<Split>();
  auto finish = [this, key, bundle, pieces, unload, done](Status st) {
    {
      std::lock_guard lock(mu_);
      releasing_.erase(key);
    }
    if (!st.is_ok()) {
      MLOG_WARN("ownership: bundle {} not split: {}", bundle, st.to_string());
      return done(st);
    }
    MLOG_INFO("ownership: bundle {} split into {}", bundle, fmt::join(pieces, ", "));
    common::MetricsRegistry::global()
        .counter("magnetar_bundle_splits_total", "Bundles this node split")
        .inc();
    if (!unload) return done(Status::ok());
    auto left = std::make_shared<std::pair<std::mutex, size_t>>();
    left->second = pieces.size();
    for (const auto& piece : pieces) {
      this->unload(piece, 0, [left, done, piece](Status moved) {
        if (!moved.is_ok()) MLOG_WARN("ownership: piece {} of a split not unloaded: {}", piece, moved.to_string());
        std::lock_guard lock(left->first);
        if (--left->second == 0) done(Status::ok());
      });
    }
  };
  // Not split: the pieces written for it go again.
  auto discard = [this, pieces, finish](Status why) {
    for (const auto& piece : pieces) {
      store_.del(std::string(kBundlesRoot) + "/" + piece, metadata::kAnyVersion, [](Status) {});
    }
    finish(why);
  };
  auto commit = [this, plan = *plan, key, version, owned_here, finish, discard]() {
    commit_split(store_, plan.ns, plan.low, plan.high, plan.cuts,
                 [this, key, version, owned_here, finish, discard](Status st) {
      if (!st.is_ok() && owned_here) return discard(st);
      if (!st.is_ok() || !owned_here) return finish(st);
      // Committed: the old bundle goes (its topics now fall in the pieces, all owned here).
      store_.del(key, version, [this, key, finish](Status deleted) {
        if (!deleted.is_ok()) MLOG_WARN("ownership: old bundle {} not deleted ({}); the failover pass will", key,
                                        deleted.to_string());
        else forget(key);
        finish(Status::ok());
      });
    });
  };
  if (!owned_here) return commit();
  state->left = pieces.size();
  for (const auto& piece : pieces) {
    const std::string piece_key = std::string(kBundlesRoot) + "/" + piece;
    store_.put(piece_key, std::to_string(self_node_), {},
               [this, state, piece_key, commit, discard](Result<metadata::Stat> put) {
                 bool last = false;
                 {
                   std::lock_guard lock(state->mu);
                   if (!put.is_ok() && state->failure.is_ok()) state->failure = put.status();
                   last = --state->left == 0;
                 }
                 if (put.is_ok()) remember(piece_key, std::to_string(self_node_), put->version);
                 if (!last) return;
                 if (!state->failure.is_ok()) return discard(state->failure);
                 commit();
               });
  }
}

size_t BundleOwnership::hand_over(std::chrono::milliseconds timeout) {
  serves_topics_ = false;  // this node assigns itself no new bundle from now on
  const auto until = std::chrono::steady_clock::now() + timeout;
  size_t moved = hand_over_once(timeout);
  // Another member may have moved a bundle here meanwhile (the load
  // manager, which does not know this one is stopping): once more.
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
  if (left.count() > 0 && !bundles_of(self_node_).empty()) moved += hand_over_once(left);
  return moved;
}

size_t BundleOwnership::hand_over_once(std::chrono::milliseconds timeout) {
  std::vector<std::string> mine = bundles_of(self_node_);
  if (mine.empty()) return 0;
  // Spread them: each to the allowed live broker with the fewest so far.
  std::map<uint64_t, size_t> load;
  for (auto& [node, live] : *nodes()) {
    if (live && node.node != self_node_) load[node.node] = 0;
  }
  if (load.empty()) {
    MLOG_INFO("ownership: no other live broker; {} bundles stay with this node", mine.size());
    return 0;
  }
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, owner] : owners_) {
      if (auto it = load.find(owner.node); it != load.end()) it->second++;
    }
  }
  struct Wait {
    std::mutex mu;
    std::condition_variable cv;
    size_t left = 0;
    size_t moved = 0;
  };
  auto wait = std::make_shared<Wait>();
  wait->left = mine.size();
  MLOG_INFO("ownership: handing {} bundles over to {} other brokers", mine.size(), load.size());
  for (const auto& bundle : mine) {
    uint64_t target = 0;
    size_t fewest = SIZE_MAX;
    for (uint64_t node : allowed_for(std::string(kBundlesRoot) + "/" + bundle, self_node_)) {
      auto it = load.find(node);
      if (it != load.end() && it->second < fewest) {
        target = node;
        fewest = it->second;
      }
    }
    if (target == 0) {
      MLOG_WARN("ownership: no other live broker may serve bundle {}; it stays here", bundle);
      std::lock_guard lock(wait->mu);
      if (--wait->left == 0) wait->cv.notify_all();
      continue;
    }
    load[target]++;
    bundle_moves("shutdown").inc();
    release(bundle, target, [wait, bundle](Status st) {
      if (!st.is_ok()) MLOG_WARN("ownership: bundle {} not handed over: {}", bundle, st.to_string());
      std::lock_guard lock(wait->mu);
      if (st.is_ok()) wait->moved++;
      if (--wait->left == 0) wait->cv.notify_all();
    });
  }
  std::unique_lock lock(wait->mu);
  wait->cv.wait_for(lock, timeout, [&]() { return wait->left == 0; });
  return wait->moved;
}

std::vector<BundleOwner> BundleOwnership::bundles_in(const NamespaceName& ns) const {
  std::vector<BundleOwner> out;
  for (const auto& range : namespace_bundles(ns)) {
    BundleOwner b;
    b.range = range;
    std::string key = fmt::format("{}/{}/{}/{}", kBundlesRoot, ns.tenant, ns.local, range);
    {
      std::lock_guard lock(mu_);
      if (auto it = owners_.find(key); it != owners_.end()) b.node = it->second.node;
      b.releasing = releasing_.count(key) != 0;
    }
    b.alive = b.node != 0 && alive(b.node);
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<NodeEndpoints> BundleOwnership::live_nodes() const {
  std::vector<NodeEndpoints> out;
  for (auto& [node, alive] : *nodes()) {
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
      if (owner.node == node) out.push_back(key.substr(kBundlesRoot.size() + 1));
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
