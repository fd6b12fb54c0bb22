#include "admin/handlers/policy_json.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "broker/bundle_layout.h"
#include "broker/ownership.h"

namespace magnetar::admin {

using broker::AutoTopicCreation;
using broker::BacklogQuota;
using broker::ClusterInfo;
using broker::DispatchRate;
using broker::NamespacePolicies;
using broker::PersistencePolicy;
using broker::PublishRate;
using broker::TenantLimits;
using broker::RetentionPolicy;
using broker::TenantInfo;
using common::Result;
using common::Status;

namespace {

// Reads the known fields of one JSON object, keeping the first error.
class Fields {
 public:
  Fields(const Json& j, std::string_view what) : j_(j), what_(what) {
    if (!j.is_object()) status_ = Status::invalid_argument(std::string(what) + " must be a JSON object");
  }
  const Status& status() const { return status_; }
  bool has(const char* name) const { return status_.is_ok() && j_.contains(name) && !j_.at(name).is_null(); }

  void i64(const char* name, int64_t& out) {
    if (!has(name)) return;
    const Json& v = j_.at(name);
    if (v.is_number_integer()) {
      out = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())
                ? std::numeric_limits<int64_t>::max()
                : v.get<int64_t>();
    } else {
      fail(name, "an integer");
    }
  }
  void i32(const char* name, int32_t& out) {
    int64_t v = out;
    i64(name, v);
    if (!status_.is_ok()) return;
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
      fail(name, "a 32-bit integer");
      return;
    }
    out = static_cast<int32_t>(v);
  }
  void opt_i32(const char* name, std::optional<int32_t>& out) {
    if (!has(name)) return;
    int32_t v = 0;
    i32(name, v);
    if (status_.is_ok()) out = v;
  }
  void f64(const char* name, double& out) {
    if (!has(name)) return;
    const Json& v = j_.at(name);
    if (v.is_number()) {
      out = v.get<double>();
    } else {
      fail(name, "a number");
    }
  }
  void boolean(const char* name, bool& out) {
    if (!has(name)) return;
    const Json& v = j_.at(name);
    if (v.is_boolean()) {
      out = v.get<bool>();
    } else {
      fail(name, "true or false");
    }
  }
  void str(const char* name, std::string& out) {
    if (!has(name)) return;
    const Json& v = j_.at(name);
    if (v.is_string()) {
      out = v.get<std::string>();
    } else {
      fail(name, "a string");
    }
  }
  void strings(const char* name, std::set<std::string>& out) {
    if (!has(name)) return;
    auto r = json_string_set(j_.at(name), std::string(what_) + "." + name);
    if (r.is_ok()) {
      out = std::move(r).value();
    } else if (status_.is_ok()) {
      status_ = r.status();
    }
  }
  // The sub-object `name` when present and an object; records an error when
  // present with another type.
  const Json* object(const char* name) {
    if (!has(name)) return nullptr;
    if (!j_.at(name).is_object()) {
      fail(name, "a JSON object");
      return nullptr;
    }
    return &j_.at(name);
  }
  void merge(const Status& st) {
    if (status_.is_ok() && !st.is_ok()) status_ = st;
  }

 private:
  void fail(const char* name, std::string_view expected) {
    if (status_.is_ok()) {
      status_ = Status::invalid_argument(std::string(what_) + "." + name + " must be " + std::string(expected));
    }
  }
  const Json& j_;
  std::string what_;
  Status status_;
};

template <typename T>
Result<T> finish(Fields& f, T value) {
  if (!f.status().is_ok()) return f.status();
  return value;
}

// Reads the first value of a per-cluster map ({"standalone": {...}}) with
// `read`; Magnetar keeps one value per namespace.
template <typename T, typename Read>
void first_of_cluster_map(Fields& f, const char* name, std::optional<T>& out, Read read) {
  const Json* m = f.object(name);
  if (m == nullptr || m->empty()) return;
  auto r = read(m->begin().value());
  if (r.is_ok()) {
    out = std::move(r).value();
  } else {
    f.merge(r.status());
  }
}

template <typename T>
Json or_null(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

}  // namespace

Result<Json> parse_json_body(std::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return Json(nullptr);
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::invalid_argument("the request body is not valid JSON");
  return j;
}

Result<int32_t> json_int32(const Json& j, std::string_view what) {
  if (!j.is_number_integer() || j.get<int64_t>() < std::numeric_limits<int32_t>::min() ||
      j.get<int64_t>() > std::numeric_limits<int32_t>::max() ||
      (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t(std::numeric_limits<int32_t>::max()))) {
    return Status::invalid_argument(std::string(what) + " must be a 32-bit integer");
  }
  return j.get<int32_t>();
}

Result<bool> json_bool(const Json& j, std::string_view what) {
  if (!j.is_boolean()) return Status::invalid_argument(std::string(what) + " must be true or false");
  return j.get<bool>();
}

Result<std::set<std::string>> json_string_set(const Json& j, std::string_view what) {
  if (!j.is_array()) return Status::invalid_argument(std::string(what) + " must be an array of strings");
  std::set<std::string> out;
  for (const auto& e : j) {
    if (!e.is_string()) return Status::invalid_argument(std::string(what) + " must be an array of strings");
    out.insert(e.get<std::string>());
  }
  return out;
}

Json to_json(const ClusterInfo& c) {
  return Json{{"serviceUrl", c.service_url},
              {"serviceUrlTls", c.service_url_tls},
              {"brokerServiceUrl", c.broker_service_url},
              {"brokerServiceUrlTls", c.broker_service_url_tls},
              {"authenticationPlugin", c.authentication_plugin},  // the parameters are a secret: not shown
              {"brokerClientTlsEnabled", c.broker_client_tls_enabled},
              {"tlsAllowInsecureConnection", c.tls_allow_insecure},
              {"brokerClientTrustCertsFilePath", c.broker_client_trust_certs_file},
              {"brokerClientCertificateFilePath", c.broker_client_certificate_file},
              {"brokerClientKeyFilePath", c.broker_client_key_file}};
}

Result<ClusterInfo> cluster_from_json(const Json& j) {
  ClusterInfo c;
  if (j.is_null()) return c;
  Fields f(j, "cluster");
  f.str("serviceUrl", c.service_url);
  f.str("serviceUrlTls", c.service_url_tls);
  f.str("brokerServiceUrl", c.broker_service_url);
  f.str("brokerServiceUrlTls", c.broker_service_url_tls);
  f.str("authenticationPlugin", c.authentication_plugin);
  f.str("authenticationParameters", c.authentication_parameters);
  f.boolean("brokerClientTlsEnabled", c.broker_client_tls_enabled);
  f.boolean("tlsAllowInsecureConnection", c.tls_allow_insecure);
  f.str("brokerClientTrustCertsFilePath", c.broker_client_trust_certs_file);
  f.str("brokerClientCertificateFilePath", c.broker_client_certificate_file);
  f.str("brokerClientKeyFilePath", c.broker_client_key_file);
  return finish(f, c);
}

Json to_json(const TenantInfo& t) {
  Json j{{"adminRoles", t.admin_roles}, {"allowedClusters", t.allowed_clusters}};
  if (!t.home_cluster.empty()) j["homeCluster"] = t.home_cluster;
  return j;
}

Result<TenantInfo> tenant_from_json(const Json& j) {
  TenantInfo t;
  Fields f(j, "tenant");
  f.strings("adminRoles", t.admin_roles);
  f.strings("allowedClusters", t.allowed_clusters);
  f.str("homeCluster", t.home_cluster);
  return finish(f, t);
}

Json to_json(const RetentionPolicy& p) {
  return Json{{"retentionTimeInMinutes", p.time_minutes}, {"retentionSizeInMB", p.size_mb}};
}

Result<RetentionPolicy> retention_from_json(const Json& j) {
  RetentionPolicy p;
  Fields f(j, "retention");
  f.i64("retentionTimeInMinutes", p.time_minutes);
  f.i64("retentionSizeInMB", p.size_mb);
  return finish(f, p);
}

Json to_json(const BacklogQuota& q) {
  return Json{{"limit", q.limit_size},
              {"limitSize", q.limit_size},
              {"limitTime", q.limit_time},
              {"policy", std::string(broker::backlog_action_name(q.action))}};
}

Result<BacklogQuota> backlog_quota_from_json(const Json& j) {
  BacklogQuota q;
  Fields f(j, "backlogQuota");
  f.i64("limit", q.limit_size);  // the older name of limitSize
  f.i64("limitSize", q.limit_size);
  f.i64("limitTime", q.limit_time);
  std::string policy;
  f.str("policy", policy);
  if (f.status().is_ok() && !policy.empty()) {
    auto a = broker::parse_backlog_action(policy);
    if (!a.is_ok()) return a.status();
    q.action = *a;
  }
  return finish(f, q);
}

Json to_json(const PersistencePolicy& p) {
  Json j{{"bookkeeperEnsemble", p.ensemble},
         {"bookkeeperWriteQuorum", p.write_quorum},
         {"bookkeeperAckQuorum", p.ack_quorum},
         {"managedLedgerMaxMarkDeleteRate", p.max_mark_delete_rate},
         {"fsyncIntervalMs", p.fsync_interval_ms}};
  // Absent: the node's --fsync.
  if (p.fsync_mode) j["fsyncMode"] = std::string(broker::fsync_mode_name(*p.fsync_mode));
  return j;
}

Result<PersistencePolicy> persistence_from_json(const Json& j) {
  PersistencePolicy p;
  Fields f(j, "persistence");
  f.i32("bookkeeperEnsemble", p.ensemble);
  f.i32("bookkeeperWriteQuorum", p.write_quorum);
  f.i32("bookkeeperAckQuorum", p.ack_quorum);
  f.f64("managedLedgerMaxMarkDeleteRate", p.max_mark_delete_rate);
  f.i32("fsyncIntervalMs", p.fsync_interval_ms);
  std::string mode;
  f.str("fsyncMode", mode);
  if (f.status().is_ok() && !mode.empty()) {
    auto m = broker::parse_fsync_mode(mode);
    if (!m.is_ok()) return m.status();
    p.fsync_mode = *m;
  }
  return finish(f, p);
}

Json to_json(const PublishRate& r) {
  return Json{{"publishThrottlingRateInMsg", r.msgs_per_second}, {"publishThrottlingRateInByte", r.bytes_per_second}};
}

Result<PublishRate> publish_rate_from_json(const Json& j) {
  PublishRate r;
  Fields f(j, "publishRate");
  f.i64("publishThrottlingRateInMsg", r.msgs_per_second);
  f.i64("publishThrottlingRateInByte", r.bytes_per_second);
  return finish(f, r);
}

Json to_json(const TenantLimits& l) {
  return Json{{"publishRate", to_json(PublishRate{l.publish_msgs_per_second, l.publish_bytes_per_second})},
              {"maxProducers", l.max_producers},
              {"maxConsumers", l.max_consumers},
              {"maxConnections", l.max_connections},
              {"maxTopics", l.max_topics},
              {"maxSubscriptions", l.max_subscriptions},
              {"storageQuotaBytes", l.storage_quota_bytes},
              {"maxNamespaces", l.max_namespaces},
              {"maxMessageSize", l.max_message_bytes},
              {"dispatchRate",
               {{"dispatchThrottlingRateInMsg", l.dispatch_msgs_per_second},
                {"dispatchThrottlingRateInByte", l.dispatch_bytes_per_second}}}};
}

Result<TenantLimits> tenant_limits_from_json(const Json& j) {
  TenantLimits l;
  Fields f(j, "tenant limits");
  if (f.has("publishRate")) {
    auto rate = publish_rate_from_json(j.at("publishRate"));
    f.merge(rate.status());
    if (rate.is_ok()) {
      l.publish_msgs_per_second = rate->msgs_per_second;
      l.publish_bytes_per_second = rate->bytes_per_second;
    }
  }
  f.i32("maxProducers", l.max_producers);
  f.i32("maxConsumers", l.max_consumers);
  f.i32("maxConnections", l.max_connections);
  f.i32("maxTopics", l.max_topics);
  f.i32("maxSubscriptions", l.max_subscriptions);
  f.i64("storageQuotaBytes", l.storage_quota_bytes);
  f.i32("maxNamespaces", l.max_namespaces);
  f.i64("maxMessageSize", l.max_message_bytes);
  if (f.has("dispatchRate")) {
    // Per second, over the whole tenant: no period, nothing relative.
    Fields d(j.at("dispatchRate"), "dispatchRate");
    d.i64("dispatchThrottlingRateInMsg", l.dispatch_msgs_per_second);
    d.i64("dispatchThrottlingRateInByte", l.dispatch_bytes_per_second);
    f.merge(d.status());
  }
  return finish(f, l);
}

Json to_json(const DispatchRate& r) {
  return Json{{"dispatchThrottlingRateInMsg", r.msgs_per_period},
              {"dispatchThrottlingRateInByte", r.bytes_per_period},
              {"relativeToPublishRate", r.relative_to_publish_rate},
              {"ratePeriodInSecond", r.period_seconds}};
}

Result<DispatchRate> dispatch_rate_from_json(const Json& j) {
  DispatchRate r;
  Fields f(j, "dispatchRate");
  f.i64("dispatchThrottlingRateInMsg", r.msgs_per_period);
  f.i64("dispatchThrottlingRateInByte", r.bytes_per_period);
  f.boolean("relativeToPublishRate", r.relative_to_publish_rate);
  f.i32("ratePeriodInSecond", r.period_seconds);
  return finish(f, r);
}

Json to_json(const AutoTopicCreation& a) {
  Json j{{"allowAutoTopicCreation", a.allow}, {"topicType", a.partitioned ? "partitioned" : "non-partitioned"}};
  if (a.partitioned) j["defaultNumPartitions"] = a.default_partitions;
  return j;
}

Result<AutoTopicCreation> auto_topic_creation_from_json(const Json& j) {
  AutoTopicCreation a;
  Fields f(j, "autoTopicCreation");
  f.boolean("allowAutoTopicCreation", a.allow);
  f.i32("defaultNumPartitions", a.default_partitions);
  std::string type = "non-partitioned";
  f.str("topicType", type);
  if (f.status().is_ok()) {
    if (type != "partitioned" && type != "non-partitioned") {
      return Status::invalid_argument("autoTopicCreation.topicType must be 'partitioned' or 'non-partitioned'");
    }
    a.partitioned = type == "partitioned";
  }
  return finish(f, a);
}

Json to_json(const broker::TracingPolicy& t) {
  return Json{{"mode", broker::trace_mode_name(t.mode)},
              {"rate", t.rate},
              {"retentionTimeInMinutes", t.retention_minutes},
              {"retentionSizeInMB", t.retention_size_mb}};
}

Result<broker::TracingPolicy> tracing_from_json(const Json& j) {
  broker::TracingPolicy t;
  Fields f(j, "tracing");
  std::string mode = "off";
  f.str("mode", mode);
  f.f64("rate", t.rate);
  f.i64("retentionTimeInMinutes", t.retention_minutes);
  f.i64("retentionSizeInMB", t.retention_size_mb);
  if (!f.status().is_ok()) return f.status();
  auto m = broker::parse_trace_mode(mode);
  if (!m.is_ok()) return m.status();
  t.mode = *m;
  if (t.mode != broker::TraceMode::kSampled && !j.contains("rate")) t.rate = 1.0;
  MAGNETAR_RETURN_IF_ERROR(broker::validate(t));
  return t;
}

Json backlog_quota_map(const NamespacePolicies& p) {
  Json m = Json::object();
  if (p.backlog_quota_size) m["destination_storage"] = to_json(*p.backlog_quota_size);
  if (p.backlog_quota_age) m["message_age"] = to_json(*p.backlog_quota_age);
  return m;
}

Json bundles_json(const broker::NamespaceName& ns) {
  Json boundaries = Json::array();
  const broker::Boundaries b = broker::layout_of(ns);
  for (uint32_t boundary : b) boundaries.push_back(fmt::format("0x{:08x}", boundary));
  return Json{{"boundaries", boundaries}, {"numBundles", b.size() - 1}};
}

Json to_json(const NamespacePolicies& p, const std::string& cluster) {
  Json auth = Json::object();
  for (const auto& [role, actions] : p.permissions) auth[role] = actions;
  Json sub_auth = Json::object();
  for (const auto& [subscription, roles] : p.subscription_roles) sub_auth[subscription] = roles;
  auto per_cluster = [&](const Json& v) { return v.is_null() ? Json::object() : Json{{cluster, v}}; };
  return Json{
      {"auth_policies",
       {{"namespace_auth", auth}, {"destination_auth", Json::object()}, {"subscription_auth_roles", sub_auth}}},
      {"subscription_auth_mode",
       std::string(broker::subscription_auth_mode_name(p.subscription_auth_mode.value_or(broker::SubscriptionAuthMode::kNone)))},
      {"replication_clusters", p.replication_clusters},
      {"backlog_quota_map", backlog_quota_map(p)},
      {"topicDispatchRate", per_cluster(p.dispatch_rate ? to_json(*p.dispatch_rate) : Json(nullptr))},
      {"subscriptionDispatchRate",
       per_cluster(p.subscription_dispatch_rate ? to_json(*p.subscription_dispatch_rate) : Json(nullptr))},
      {"publishMaxMessageRate", per_cluster(p.publish_rate ? to_json(*p.publish_rate) : Json(nullptr))},
      {"persistence", p.persistence ? to_json(*p.persistence) : Json(nullptr)},
      {"retention_policies", p.retention ? to_json(*p.retention) : Json(nullptr)},
      {"deduplicationEnabled", or_null(p.deduplication)},
      {"autoTopicCreationOverride", p.auto_topic_creation ? to_json(*p.auto_topic_creation) : Json(nullptr)},
      {"message_ttl_in_seconds", or_null(p.message_ttl_seconds)},
      {"max_producers_per_topic", or_null(p.max_producers_per_topic)},
      {"max_consumers_per_topic", or_null(p.max_consumers_per_topic)},
      {"max_consumers_per_subscription", or_null(p.max_consumers_per_subscription)},
      {"max_subscriptions_per_topic", or_null(p.max_subscriptions_per_topic)},
      {"compaction_threshold", p.compaction_threshold ? Json(*p.compaction_threshold) : Json(nullptr)},
      {"max_unacked_messages_per_consumer", or_null(p.max_unacked_messages_per_consumer)},
      {"max_unacked_messages_per_subscription", or_null(p.max_unacked_messages_per_subscription)},
      {"max_topics_per_namespace", or_null(p.max_topics_per_namespace)},
      {"subscription_expiration_time_minutes", or_null(p.subscription_expiration_minutes)},
      {"tracing", p.tracing ? to_json(*p.tracing) : Json(nullptr)},
      {"deleted", false},
  };
}

Result<NamespacePolicies> policies_from_json(const Json& j) {
  NamespacePolicies p;
  if (j.is_null()) return p;
  Fields f(j, "policies");
  f.strings("replication_clusters", p.replication_clusters);
  if (const Json* auth = f.object("auth_policies")) {
    Fields a(*auth, "auth_policies");
    if (const Json* ns_auth = a.object("namespace_auth")) {
      for (const auto& [role, actions] : ns_auth->items()) {
        auto set = json_string_set(actions, "auth_policies.namespace_auth." + role);
        if (!set.is_ok()) return set.status();
        p.permissions[role] = std::move(set).value();
      }
    }
    if (const Json* sub_auth = a.object("subscription_auth_roles")) {
      for (const auto& [subscription, roles] : sub_auth->items()) {
        auto set = json_string_set(roles, "auth_policies.subscription_auth_roles." + subscription);
        if (!set.is_ok()) return set.status();
        p.subscription_roles[subscription] = std::move(set).value();
      }
    }
    f.merge(a.status());
  }
  if (const Json* quotas = f.object("backlog_quota_map")) {
    for (const auto& [type, quota] : quotas->items()) {
      auto q = backlog_quota_from_json(quota);
      if (!q.is_ok()) return q.status();
      if (type == "destination_storage") {
        p.backlog_quota_size = *q;
      } else if (type == "message_age") {
        p.backlog_quota_age = *q;
      } else {
        return Status::invalid_argument("backlog_quota_map key must be destination_storage or message_age");
      }
    }
  }
  first_of_cluster_map(f, "topicDispatchRate", p.dispatch_rate, dispatch_rate_from_json);
  first_of_cluster_map(f, "subscriptionDispatchRate", p.subscription_dispatch_rate, dispatch_rate_from_json);
  first_of_cluster_map(f, "publishMaxMessageRate", p.publish_rate, publish_rate_from_json);
  auto sub = [&f](const char* name, auto& out, auto read) {
    const Json* o = f.object(name);
    if (o == nullptr) return;
    auto r = read(*o);
    if (r.is_ok()) {
      out = std::move(r).value();
    } else {
      f.merge(r.status());
    }
  };
  sub("persistence", p.persistence, persistence_from_json);
  sub("retention_policies", p.retention, retention_from_json);
  sub("autoTopicCreationOverride", p.auto_topic_creation, auto_topic_creation_from_json);
  sub("tracing", p.tracing, tracing_from_json);
  if (f.has("subscription_auth_mode")) {
    std::string mode;
    f.str("subscription_auth_mode", mode);
    if (!mode.empty()) {
      auto m = broker::parse_subscription_auth_mode(mode);
      if (!m.is_ok()) return m.status();
      p.subscription_auth_mode = *m;
    }
  }
  if (f.has("deduplicationEnabled")) {
    bool d = false;
    f.boolean("deduplicationEnabled", d);
    p.deduplication = d;
  }
  f.opt_i32("message_ttl_in_seconds", p.message_ttl_seconds);
  f.opt_i32("max_producers_per_topic", p.max_producers_per_topic);
  f.opt_i32("max_consumers_per_topic", p.max_consumers_per_topic);
  f.opt_i32("max_consumers_per_subscription", p.max_consumers_per_subscription);
  f.opt_i32("max_subscriptions_per_topic", p.max_subscriptions_per_topic);
  f.opt_i32("max_unacked_messages_per_consumer", p.max_unacked_messages_per_consumer);
  f.opt_i32("max_unacked_messages_per_subscription", p.max_unacked_messages_per_subscription);
  f.opt_i32("max_topics_per_namespace", p.max_topics_per_namespace);
  f.opt_i32("subscription_expiration_time_minutes", p.subscription_expiration_minutes);
  return finish(f, p);
}

}  // namespace magnetar::admin
