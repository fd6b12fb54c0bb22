// FlatBuffers encodings of the multi-tenancy records (tenancy.fbs).
#include "broker/policies.h"
#include "broker/tenancy.h"
#include "broker/tenancy_generated.h"

namespace magnetar::broker {

using common::Result;
using common::Status;

namespace {

constexpr uint16_t kMaxPolicyFormat = 1;  // newest record format this binary reads

using Builder = flatbuffers::FlatBufferBuilder;

std::string finish(Builder& b) {
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

template <typename T>
Result<const T*> root(std::string_view bytes, std::string_view what) {
  flatbuffers::Verifier v(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!v.VerifyBuffer<T>(nullptr)) return Status::corruption(std::string(what) + " record fails verification");
  const T* r = flatbuffers::GetRoot<T>(bytes.data());
  if (r->format() > kMaxPolicyFormat) {
    return Status::corruption(std::string(what) + " record has format " + std::to_string(r->format()) +
                              ", newer than this binary reads");
  }
  return r;
}

flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>> strings(
    Builder& b, const std::set<std::string>& s) {
  std::vector<std::string> v(s.begin(), s.end());
  return b.CreateVectorOfStrings(v);
}

std::set<std::string> read_strings(const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* v) {
  std::set<std::string> out;
  if (v) {
    for (const auto* s : *v) out.insert(s->str());
  }
  return out;
}

std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

flatbuffers::Offset<fb::BacklogQuota> backlog(Builder& b, const std::optional<BacklogQuota>& q) {
  if (!q) return 0;
  return fb::CreateBacklogQuota(b, q->limit_size, q->limit_time, static_cast<fb::BacklogAction>(q->action));
}

std::optional<BacklogQuota> read_backlog(const fb::BacklogQuota* q) {
  if (!q) return std::nullopt;
  auto action = static_cast<BacklogQuotaAction>(
      std::min<int>(static_cast<int>(q->action()), static_cast<int>(fb::BacklogAction::MAX)));
  return BacklogQuota{q->limit_size(), q->limit_time(), action};
}

flatbuffers::Offset<fb::DispatchRate> dispatch(Builder& b, const std::optional<DispatchRate>& r) {
  if (!r) return 0;
  return fb::CreateDispatchRate(b, r->msgs_per_period, r->bytes_per_period, r->period_seconds,
                                r->relative_to_publish_rate);
}

std::optional<DispatchRate> read_dispatch(const fb::DispatchRate* r) {
  if (!r) return std::nullopt;
  return DispatchRate{r->msgs_per_period(), r->bytes_per_period(), r->period_seconds(),
                      r->relative_to_publish_rate()};
}

template <typename T>
std::optional<T> opt(const flatbuffers::Optional<T>& v) {
  return v.has_value() ? std::optional<T>(*v) : std::nullopt;
}

}  // namespace

std::string encode_cluster(const ClusterInfo& c) {
  Builder b(256);
  auto off = fb::CreateClusterDirect(b, 1, c.service_url.c_str(), c.service_url_tls.c_str(),
                                     c.broker_service_url.c_str(), c.broker_service_url_tls.c_str(),
                                     c.authentication_plugin.c_str(), c.authentication_parameters.c_str(),
                                     c.broker_client_tls_enabled, c.tls_allow_insecure,
                                     c.broker_client_trust_certs_file.c_str(),
                                     c.broker_client_certificate_file.c_str(), c.broker_client_key_file.c_str());
  b.Finish(off);
  return finish(b);
}

Result<ClusterInfo> decode_cluster(std::string_view bytes) {
  auto r = root<fb::Cluster>(bytes, "cluster");
  if (!r.is_ok()) return r.status();
  const fb::Cluster* c = *r;
  return ClusterInfo{str(c->service_url()),           str(c->service_url_tls()),
                     str(c->broker_service_url()),    str(c->broker_service_url_tls()),
                     str(c->authentication_plugin()), str(c->authentication_parameters()),
                     c->broker_client_tls_enabled(),  c->tls_allow_insecure(),
                     str(c->broker_client_trust_certs_file()), str(c->broker_client_certificate_file()),
                     str(c->broker_client_key_file())};
}

std::string encode_tenant(const TenantInfo& t) {
  Builder b(256);
  auto roles = strings(b, t.admin_roles);
  auto clusters = strings(b, t.allowed_clusters);
  auto home = t.home_cluster.empty() ? 0 : b.CreateString(t.home_cluster);
  b.Finish(fb::CreateTenant(b, 1, roles, clusters, home));
  return finish(b);
}

Result<TenantInfo> decode_tenant(std::string_view bytes) {
  auto r = root<fb::Tenant>(bytes, "tenant");
  if (!r.is_ok()) return r.status();
  return TenantInfo{read_strings((*r)->admin_roles()), read_strings((*r)->allowed_clusters()),
                    str((*r)->home_cluster())};
}

std::string encode_tenant_limits(const TenantLimits& l) {
  Builder b(64);
  b.Finish(fb::CreateTenantLimits(b, 1, l.publish_msgs_per_second, l.publish_bytes_per_second, l.max_producers,
                                  l.max_consumers, l.max_connections, l.max_topics, l.max_subscriptions,
                                  l.storage_quota_bytes, l.dispatch_msgs_per_second, l.dispatch_bytes_per_second,
                                  l.max_namespaces, l.max_message_bytes));
  return finish(b);
}

Result<TenantLimits> decode_tenant_limits(std::string_view bytes) {
  auto r = root<fb::TenantLimits>(bytes, "tenant limits");
  if (!r.is_ok()) return r.status();
  const fb::TenantLimits& l = **r;
  return TenantLimits{l.publish_msgs_per_second(),  l.publish_bytes_per_second(), l.max_producers(),
                      l.max_consumers(),            l.max_connections(),         l.max_topics(),
                      l.max_subscriptions(),        l.storage_quota_bytes(),     l.dispatch_msgs_per_second(),
                      l.dispatch_bytes_per_second(),  l.max_namespaces(),          l.max_message_bytes()};
}

std::string encode_policies(const NamespacePolicies& p) {
  Builder b(512);
  std::vector<flatbuffers::Offset<fb::Permission>> perms;
  for (const auto& [role, actions] : p.permissions) {
    auto r = b.CreateString(role);
    auto a = strings(b, actions);
    perms.push_back(fb::CreatePermission(b, r, a));
  }
  auto permissions = b.CreateVectorOfSortedTables(&perms);
  std::vector<flatbuffers::Offset<fb::SubscriptionRoles>> sub_roles;
  for (const auto& [subscription, roles] : p.subscription_roles) {
    auto s = b.CreateString(subscription);
    auto r = strings(b, roles);
    sub_roles.push_back(fb::CreateSubscriptionRoles(b, s, r));
  }
  auto subscription_roles = b.CreateVectorOfSortedTables(&sub_roles);
  auto replication = strings(b, p.replication_clusters);
  flatbuffers::Offset<fb::Retention> retention = 0;
  if (p.retention) retention = fb::CreateRetention(b, p.retention->time_minutes, p.retention->size_mb);
  auto quota_size = backlog(b, p.backlog_quota_size);
  auto quota_age = backlog(b, p.backlog_quota_age);
  flatbuffers::Offset<fb::Persistence> persistence = 0;
  if (p.persistence) {
    const auto& s = *p.persistence;
    const fb::FsyncMode mode = s.fsync_mode ? static_cast<fb::FsyncMode>(*s.fsync_mode) : fb::FsyncMode::NodeDefault;
    persistence = fb::CreatePersistence(b, s.ensemble, s.write_quorum, s.ack_quorum, s.max_mark_delete_rate, mode,
                                        s.fsync_interval_ms);
  }
  flatbuffers::Offset<fb::PublishRate> publish = 0;
  if (p.publish_rate) {
    publish = fb::CreatePublishRate(b, p.publish_rate->msgs_per_second, p.publish_rate->bytes_per_second);
  }
  auto dispatch_topic = dispatch(b, p.dispatch_rate);
  auto dispatch_sub = dispatch(b, p.subscription_dispatch_rate);
  flatbuffers::Offset<fb::AutoTopicCreation> auto_create = 0;
  if (p.auto_topic_creation) {
    const auto& a = *p.auto_topic_creation;
    auto_create = fb::CreateAutoTopicCreation(b, a.allow, a.partitioned, a.default_partitions);
  }

  flatbuffers::Offset<fb::Tracing> tracing = 0;
  if (p.tracing) {
    const auto& t = *p.tracing;
    tracing = fb::CreateTracing(b, static_cast<fb::TraceMode>(t.mode), t.rate, t.retention_minutes,
                                t.retention_size_mb);
  }

  flatbuffers::Offset<fb::BookieAffinity> affinity = 0;
  if (p.bookie_affinity) {
    affinity = fb::CreateBookieAffinity(b, b.CreateString(p.bookie_affinity->primary),
                                        b.CreateString(p.bookie_affinity->secondary));
  }

  fb::NamespacePoliciesBuilder n(b);
  n.add_retention(retention);
  if (p.message_ttl_seconds) n.add_message_ttl_seconds(*p.message_ttl_seconds);
  n.add_backlog_quota_size(quota_size);
  n.add_backlog_quota_age(quota_age);
  n.add_persistence(persistence);
  if (p.deduplication) n.add_deduplication(*p.deduplication);
  n.add_permissions(permissions);
  n.add_publish_rate(publish);
  n.add_dispatch_rate(dispatch_topic);
  n.add_subscription_dispatch_rate(dispatch_sub);
  if (p.max_producers_per_topic) n.add_max_producers_per_topic(*p.max_producers_per_topic);
  if (p.max_consumers_per_topic) n.add_max_consumers_per_topic(*p.max_consumers_per_topic);
  if (p.max_consumers_per_subscription) n.add_max_consumers_per_subscription(*p.max_consumers_per_subscription);
  if (p.max_subscriptions_per_topic) n.add_max_subscriptions_per_topic(*p.max_subscriptions_per_topic);
  if (p.max_unacked_messages_per_consumer) {
    n.add_max_unacked_messages_per_consumer(*p.max_unacked_messages_per_consumer);
  }
  if (p.max_unacked_messages_per_subscription) {
    n.add_max_unacked_messages_per_subscription(*p.max_unacked_messages_per_subscription);
  }
  if (p.max_topics_per_namespace) n.add_max_topics_per_namespace(*p.max_topics_per_namespace);
  if (p.subscription_expiration_minutes) {
    n.add_subscription_expiration_minutes(*p.subscription_expiration_minutes);
  }
  n.add_auto_topic_creation(auto_create);
  n.add_replication_clusters(replication);
  n.add_tracing(tracing);
  n.add_subscription_roles(subscription_roles);
  if (p.subscription_auth_mode) {
    n.add_subscription_auth_mode(static_cast<fb::SubscriptionAuthMode>(*p.subscription_auth_mode));
  }
  if (p.compaction_threshold) n.add_compaction_threshold(*p.compaction_threshold);
  if (p.cleanup_policy) n.add_cleanup_policy(static_cast<fb::CleanupPolicy>(*p.cleanup_policy));
  if (p.delete_retention_ms) n.add_delete_retention_ms(*p.delete_retention_ms);
  if (p.min_compaction_lag_ms) n.add_min_compaction_lag_ms(*p.min_compaction_lag_ms);
  n.add_bookie_affinity(affinity);
  b.Finish(n.Finish());
  return finish(b);
}

Result<NamespacePolicies> decode_policies(std::string_view bytes) {
  auto r = root<fb::NamespacePolicies>(bytes, "namespace policies");
  if (!r.is_ok()) return r.status();
  const fb::NamespacePolicies* n = *r;
  NamespacePolicies p;
  if (const auto* ret = n->retention()) p.retention = RetentionPolicy{ret->time_minutes(), ret->size_mb()};
  p.message_ttl_seconds = opt(n->message_ttl_seconds());
  p.backlog_quota_size = read_backlog(n->backlog_quota_size());
  p.backlog_quota_age = read_backlog(n->backlog_quota_age());
  if (const auto* s = n->persistence()) {
    std::optional<FsyncMode> mode;
    if (s->fsync_mode() != fb::FsyncMode::NodeDefault) {
      const int stored = std::min<int>(static_cast<int>(s->fsync_mode()), static_cast<int>(fb::FsyncMode::Never));
      mode = static_cast<FsyncMode>(stored);
    }
    p.persistence = PersistencePolicy{s->ensemble(), s->write_quorum(), s->ack_quorum(),
                                      s->max_mark_delete_rate(), mode, s->fsync_interval_ms()};
  }
  p.deduplication = opt(n->deduplication());
  if (n->permissions()) {
    for (const auto* perm : *n->permissions()) p.permissions[str(perm->role())] = read_strings(perm->actions());
  }
  if (n->subscription_roles()) {
    for (const auto* s : *n->subscription_roles()) p.subscription_roles[str(s->subscription())] = read_strings(s->roles());
  }
  if (auto mode = n->subscription_auth_mode()) {
    p.subscription_auth_mode =
        *mode == fb::SubscriptionAuthMode::Prefix ? SubscriptionAuthMode::kPrefix : SubscriptionAuthMode::kNone;
  }
  if (const auto* pr = n->publish_rate()) p.publish_rate = PublishRate{pr->msgs_per_second(), pr->bytes_per_second()};
  p.dispatch_rate = read_dispatch(n->dispatch_rate());
  p.subscription_dispatch_rate = read_dispatch(n->subscription_dispatch_rate());
  p.max_producers_per_topic = opt(n->max_producers_per_topic());
  p.max_consumers_per_topic = opt(n->max_consumers_per_topic());
  p.max_consumers_per_subscription = opt(n->max_consumers_per_subscription());
  p.max_subscriptions_per_topic = opt(n->max_subscriptions_per_topic());
  p.max_unacked_messages_per_consumer = opt(n->max_unacked_messages_per_consumer());
  p.max_unacked_messages_per_subscription = opt(n->max_unacked_messages_per_subscription());
  p.max_topics_per_namespace = opt(n->max_topics_per_namespace());
  p.subscription_expiration_minutes = opt(n->subscription_expiration_minutes());
  if (const auto* a = n->auto_topic_creation()) {
    p.auto_topic_creation = AutoTopicCreation{a->allow(), a->partitioned(), a->default_partitions()};
  }
  p.replication_clusters = read_strings(n->replication_clusters());
  if (const auto* t = n->tracing()) {
    auto mode = static_cast<TraceMode>(
        std::min<int>(static_cast<int>(t->mode()), static_cast<int>(fb::TraceMode::MAX)));
    p.tracing = TracingPolicy{mode, t->rate(), t->retention_minutes(), t->retention_size_mb()};
  }
  p.compaction_threshold = opt(n->compaction_threshold());
  if (auto cleanup = n->cleanup_policy()) {
    p.cleanup_policy = static_cast<CleanupPolicy>(
        std::min<int>(static_cast<int>(*cleanup), static_cast<int>(fb::CleanupPolicy::MAX)));
  }
  p.delete_retention_ms = opt(n->delete_retention_ms());
  p.min_compaction_lag_ms = opt(n->min_compaction_lag_ms());
  if (const auto* a = n->bookie_affinity()) {
    p.bookie_affinity = BookieAffinityGroup{a->primary() ? a->primary()->str() : std::string(),
                                            a->secondary() ? a->secondary()->str() : std::string()};
  }
  return p;
}

std::string encode_partitions(int32_t partitions) {
  Builder b(64);
  b.Finish(fb::CreatePartitionedTopic(b, 1, partitions));
  return finish(b);
}

Result<int32_t> decode_partitions(std::string_view bytes) {
  auto r = root<fb::PartitionedTopic>(bytes, "partitioned topic");
  if (!r.is_ok()) return r.status();
  return (*r)->partitions();
}

std::string encode_configuration(const TenantConfiguration& config) {
  Builder b(1024);
  const std::string tenant = encode_tenant(config.info);
  const std::string limits = config.limits ? encode_tenant_limits(*config.limits) : std::string();
  auto named_policies = [&b](const std::map<std::string, NamespacePolicies>& all) {
    std::vector<flatbuffers::Offset<fb::NamespaceConfiguration>> out;
    for (const auto& [name, policies] : all) {
      const std::string bytes = encode_policies(policies);
      out.push_back(fb::CreateNamespaceConfiguration(
          b, b.CreateString(name), b.CreateVector(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())));
    }
    return b.CreateVector(out);
  };
  auto namespaces = named_policies(config.namespaces);
  auto topic_policies = named_policies(config.topic_policies);
  auto tenant_bytes = b.CreateVector(reinterpret_cast<const uint8_t*>(tenant.data()), tenant.size());
  auto limits_bytes = config.limits ? b.CreateVector(reinterpret_cast<const uint8_t*>(limits.data()), limits.size())
                                    : flatbuffers::Offset<flatbuffers::Vector<uint8_t>>();
  std::vector<flatbuffers::Offset<fb::PartitionedTopicConfiguration>> partitioned;
  for (const auto& [name, partitions] : config.partitioned_topics) {
    partitioned.push_back(fb::CreatePartitionedTopicConfiguration(b, b.CreateString(name), partitions));
  }
  b.Finish(fb::CreateTenantConfiguration(b, 1, tenant_bytes, limits_bytes, namespaces, b.CreateVector(partitioned),
                                         topic_policies));
  return finish(b);
}

Result<TenantConfiguration> decode_configuration(std::string_view bytes) {
  auto r = root<fb::TenantConfiguration>(bytes, "tenant configuration");
  if (!r.is_ok()) return r.status();
  const fb::TenantConfiguration* c = *r;
  auto view = [](const flatbuffers::Vector<uint8_t>* v) {
    return v ? std::string_view(reinterpret_cast<const char*>(v->data()), v->size()) : std::string_view();
  };
  TenantConfiguration config;
  auto tenant = decode_tenant(view(c->tenant()));
  if (!tenant.is_ok()) return tenant.status();
  config.info = std::move(*tenant);
  if (c->limits() != nullptr) {
    auto limits = decode_tenant_limits(view(c->limits()));
    if (!limits.is_ok()) return limits.status();
    config.limits = *limits;
  }
  auto named_policies = [&view](const flatbuffers::Vector<flatbuffers::Offset<fb::NamespaceConfiguration>>* all,
                                 const char* what, std::map<std::string, NamespacePolicies>& out) {
    if (all == nullptr) return Status::ok();
    for (const fb::NamespaceConfiguration* one : *all) {
      if (one->name() == nullptr) return Status::corruption(std::string("tenant configuration: a ") + what +
                                                            " without a name");
      auto policies = decode_policies(view(one->policies()));
      if (!policies.is_ok()) return policies.status();
      out.emplace(one->name()->str(), std::move(*policies));
    }
    return Status::ok();
  };
  MAGNETAR_RETURN_IF_ERROR(named_policies(c->namespaces(), "namespace", config.namespaces));
  MAGNETAR_RETURN_IF_ERROR(named_policies(c->topic_policies(), "topic's policies", config.topic_policies));
  if (c->partitioned_topics() != nullptr) {
    for (const fb::PartitionedTopicConfiguration* t : *c->partitioned_topics()) {
      if (t->name() == nullptr) return Status::corruption("tenant configuration: a partitioned topic without a name");
      config.partitioned_topics.emplace(t->name()->str(), t->partitions());
    }
  }
  return config;
}

}  // namespace magnetar::broker
