#include "broker/policy_cache.h"

#include <mutex>

#include "broker/tenancy.h"
#include "common/logging.h"
#include "metadata/blocking.h"

namespace magnetar::broker {

using common::ErrorCode;
using common::Status;

namespace {

constexpr std::string_view kNamespacePrefix = "/admin/policies/";
constexpr std::string_view kTopicPrefix = "/admin/topic-policies/";
constexpr std::string_view kTenantPrefix = "/admin/tenants/";
constexpr std::string_view kTenantLimitsPrefix = "/admin/tenant-limits/";

// Lists every key under `prefix` that is `depth` segments below it.
common::Result<std::vector<std::string>> keys_at_depth(metadata::Store& store, std::string prefix, int depth) {
  std::vector<std::string> level{prefix};
  for (int d = 0; d < depth; ++d) {
    std::vector<std::string> next;
    for (const auto& parent : level) {
      auto children = metadata::blocking::list_children(store, parent);
      if (!children.is_ok()) return children.status();
      for (const auto& c : *children) next.push_back(parent + "/" + c);
    }
    level = std::move(next);
  }
  return level;
}

template <typename T>
void overlay(std::optional<T>& into, const std::optional<T>& from) {
  if (!into && from) into = from;
}

// Fills what `into` leaves unset from `from`.
void inherit(NamespacePolicies& into, const NamespacePolicies& from) {
  overlay(into.retention, from.retention);
  overlay(into.message_ttl_seconds, from.message_ttl_seconds);
  overlay(into.backlog_quota_size, from.backlog_quota_size);
  overlay(into.backlog_quota_age, from.backlog_quota_age);
  overlay(into.persistence, from.persistence);
  overlay(into.deduplication, from.deduplication);
  overlay(into.publish_rate, from.publish_rate);
  overlay(into.dispatch_rate, from.dispatch_rate);
  overlay(into.subscription_dispatch_rate, from.subscription_dispatch_rate);
  overlay(into.max_producers_per_topic, from.max_producers_per_topic);
  overlay(into.max_consumers_per_topic, from.max_consumers_per_topic);
  overlay(into.max_consumers_per_subscription, from.max_consumers_per_subscription);
  overlay(into.max_subscriptions_per_topic, from.max_subscriptions_per_topic);
  overlay(into.max_unacked_messages_per_consumer, from.max_unacked_messages_per_consumer);
  overlay(into.max_unacked_messages_per_subscription, from.max_unacked_messages_per_subscription);
  overlay(into.max_topics_per_namespace, from.max_topics_per_namespace);
  overlay(into.subscription_expiration_minutes, from.subscription_expiration_minutes);
  overlay(into.auto_topic_creation, from.auto_topic_creation);
  overlay(into.tracing, from.tracing);
  overlay(into.subscription_auth_mode, from.subscription_auth_mode);
  overlay(into.compaction_threshold, from.compaction_threshold);
  overlay(into.cleanup_policy, from.cleanup_policy);
  overlay(into.delete_retention_ms, from.delete_retention_ms);
  overlay(into.min_compaction_lag_ms, from.min_compaction_lag_ms);
  if (into.permissions.empty()) into.permissions = from.permissions;
  if (into.subscription_roles.empty()) into.subscription_roles = from.subscription_roles;
  if (into.replication_clusters.empty()) into.replication_clusters = from.replication_clusters;
}

std::vector<std::string_view> split_path(std::string_view rest) {
  std::vector<std::string_view> parts;
  while (!rest.empty()) {
    size_t slash = rest.find('/');
    parts.push_back(rest.substr(0, slash));
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  return parts;
}

}  // namespace

std::optional<PolicyScope> PolicyScope::of_key(std::string_view key) {
  auto under = [&key](std::string_view prefix, size_t depth) -> std::optional<std::vector<std::string_view>> {
    if (key.substr(0, prefix.size()) != prefix) return std::nullopt;
    auto parts = split_path(key.substr(prefix.size()));
    if (parts.size() != depth) return std::nullopt;
    return parts;
  };
  PolicyScope scope;
  if (auto p = under(kTenantPrefix, 1)) {
    scope.kind = Kind::kTenant;
    scope.tenant = std::string((*p)[0]);
  } else if (auto p = under(kTenantLimitsPrefix, 1)) {
    scope.kind = Kind::kTenantLimits;
    scope.tenant = std::string((*p)[0]);
  } else if (auto p = under(kNamespacePrefix, 2)) {
    scope.kind = Kind::kNamespace;
    scope.tenant = std::string((*p)[0]);
    scope.ns = std::string((*p)[1]);
  } else if (auto p = under(kTopicPrefix, 4)) {
    auto domain = parse_domain((*p)[2]);
    if (!domain.is_ok()) return std::nullopt;
    auto topic = TopicName::of(*domain, (*p)[0], (*p)[1], (*p)[3]);
    if (!topic.is_ok()) return std::nullopt;
    scope.kind = Kind::kTopic;
    scope.tenant = topic->ns.tenant;
    scope.ns = topic->ns.local;
    scope.topic = std::move(topic).value();
  } else {
    return std::nullopt;
  }
  return scope;
}

bool PolicyScope::covers(const TopicName& t) const {
  if (t.ns.tenant != tenant) return false;
  switch (kind) {
    case Kind::kTenant:
    case Kind::kTenantLimits:
      return true;
    case Kind::kNamespace:
      return t.ns.local == ns;
    case Kind::kTopic:
      if (t.ns.local != ns || t.domain != topic->domain) return false;
      return t.local == topic->local || (t.is_partition() && t.base().local == topic->local);
  }
  return false;
}

Status PolicyCache::State::put(const std::string& key, std::string_view bytes) {
  if (key.rfind(kTenantPrefix, 0) == 0) {
    auto t = decode_tenant(bytes);
    if (!t.is_ok()) return t.status();
    tenants[key] = std::make_shared<const TenantInfo>(std::move(t).value());
    return Status::ok();
  }
  if (key.rfind(kTenantLimitsPrefix, 0) == 0) {
    auto l = decode_tenant_limits(bytes);
    if (!l.is_ok()) return l.status();
    limits[key] = std::make_shared<const TenantLimits>(std::move(l).value());
    return Status::ok();
  }
  auto p = decode_policies(bytes);
  if (!p.is_ok()) return p.status();
  by_key[key] = std::make_shared<const NamespacePolicies>(std::move(p).value());
  return Status::ok();
}

std::shared_ptr<const TenantInfo> PolicyCache::tenant(const std::string& name) const {
  std::shared_lock lock(state_->mu);
  auto it = state_->tenants.find(std::string(kTenantPrefix) + name);
  return it == state_->tenants.end() ? nullptr : it->second;
}

std::shared_ptr<const TenantLimits> PolicyCache::tenant_limits(const std::string& tenant) const {
  std::shared_lock lock(state_->mu);
  auto it = state_->limits.find(std::string(kTenantLimitsPrefix) + tenant);
  return it == state_->limits.end() ? nullptr : it->second;
}

PolicyCache::PolicyCache(metadata::Store& store) : store_(store), state_(std::make_shared<State>()) {}

PolicyCache::~PolicyCache() { stop(); }

Status PolicyCache::start() {
  {
    std::unique_lock lock(state_->mu);
    state_->loading = true;
  }
  for (auto prefix : {kNamespacePrefix, kTopicPrefix, kTenantPrefix, kTenantLimitsPrefix}) {
    auto id = store_.watch(std::string(prefix), [&store = store_, state = state_](const metadata::Event& e) {
      refresh(store, state, e.key);
    });
    if (!id.is_ok()) return id.status();
    watches_.push_back(*id);
  }
  // /admin/policies/{tenant}/{namespace}; /admin/topic-policies/{t}/{ns}/{domain}/{topic}.
  for (auto [prefix, depth] :
       {std::pair{kNamespacePrefix, 2}, std::pair{kTopicPrefix, 4}, std::pair{kTenantPrefix, 1},
        std::pair{kTenantLimitsPrefix, 1}}) {
    std::string root(prefix.substr(0, prefix.size() - 1));
    auto keys = keys_at_depth(store_, root, depth);
    if (!keys.is_ok()) return keys.status();
    for (const auto& key : *keys) {
      auto r = metadata::blocking::get(store_, key);
      if (r.status().code() == ErrorCode::kNotFound) continue;  // deleted meanwhile; the watch saw it
      if (!r.is_ok()) return r.status();
      std::unique_lock lock(state_->mu);
      if (!state_->settled.count(key)) MAGNETAR_RETURN_IF_ERROR(state_->put(key, r->value));
    }
  }
  std::unique_lock lock(state_->mu);
  state_->loading = false;
  state_->settled.clear();
  return Status::ok();
}

void PolicyCache::stop() {
  for (auto id : watches_) store_.unwatch(id);
  watches_.clear();
}

void PolicyCache::refresh(metadata::Store& store, const std::shared_ptr<State>& state, const std::string& key) {
  // Runs on the metadata thread: ask for the value without waiting. Reads
  // queue behind earlier ones, so the last read of a key sees its newest
  // value.
  store.get(key, [state, key](common::Result<metadata::Record> r) {
    if (!r.is_ok() && r.status().code() != ErrorCode::kNotFound) {
      if (r.status().code() != ErrorCode::kUnavailable) {
        MLOG_WARN("policy cache: cannot refresh {}: {}", key, r.status().to_string());
      }
      return;
    }
    {
      std::unique_lock lock(state->mu);
      if (state->loading) state->settled.insert(key);
      if (!r.is_ok()) {
        state->by_key.erase(key);
        state->tenants.erase(key);
        state->limits.erase(key);
      } else if (Status st = state->put(key, r->value); !st.is_ok()) {
        MLOG_WARN("policy cache: cannot read {}: {}", key, st.to_string());
        return;
      }
    }
    state->refreshes.fetch_add(1, std::memory_order_relaxed);
    auto scope = PolicyScope::of_key(key);
    if (!scope) return;
    for (const auto& listener : state->listeners) listener(*scope);
  });
}

std::shared_ptr<const NamespacePolicies> PolicyCache::find(const std::string& key) const {
  std::shared_lock lock(state_->mu);
  auto it = state_->by_key.find(key);
  return it == state_->by_key.end() ? nullptr : it->second;
}

std::shared_ptr<const NamespacePolicies> PolicyCache::namespace_policies(const NamespaceName& ns) const {
  return find(namespace_key(ns));
}

std::shared_ptr<const NamespacePolicies> PolicyCache::topic_policies(const TopicName& topic) const {
  return find(topic_policies_key(topic));
}

std::vector<std::shared_ptr<const NamespacePolicies>> PolicyCache::topic_overrides(const NamespaceName& ns) const {
  const std::string prefix = topic_policies_prefix(ns);
  std::vector<std::shared_ptr<const NamespacePolicies>> out;
  std::shared_lock lock(state_->mu);
  for (auto it = state_->by_key.lower_bound(prefix); it != state_->by_key.end() && it->first.starts_with(prefix);
       ++it) {
    out.push_back(it->second);
  }
  return out;
}

std::optional<NamespacePolicies> PolicyCache::effective(const TopicName& topic) const {
  auto ns = namespace_policies(topic.ns);
  if (!ns) return std::nullopt;
  NamespacePolicies out;
  if (auto own = topic_policies(topic)) out = *own;
  if (topic.is_partition()) {
    if (auto base = topic_policies(topic.base())) inherit(out, *base);
  }
  inherit(out, *ns);
  return out;
}

std::optional<AutoTopicCreation> PolicyCache::auto_topic_creation(const TopicName& topic,
                                                                  const AutoTopicCreation& broker_default) const {
  auto ns = namespace_policies(topic.ns);
  if (!ns) return std::nullopt;
  return ns->auto_topic_creation.value_or(broker_default);
}

}  // namespace magnetar::broker
