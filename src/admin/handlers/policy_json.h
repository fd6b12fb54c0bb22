// The JSON shapes of the multi-tenancy records, with Pulsar's field names
// (ClusterData, TenantInfo, Policies, RetentionPolicies, BacklogQuota,
// PersistencePolicies, PublishRate, DispatchRate, AutoTopicCreationOverride),
// so that pulsar-admin habits and scripts keep working.
//
// Readers are strict about types and lenient about presence: a known field
// with the wrong JSON type is InvalidArgument naming the field; a missing
// field keeps the record's default; unknown fields are ignored, as Pulsar
// ignores them. Readers never throw.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "broker/naming.h"
#include "broker/policies.h"
#include "common/result.h"

namespace magnetar::admin {

using Json = nlohmann::json;

// Parses a request body. InvalidArgument (with the parser's position) when it
// is not JSON; an empty body parses as null.
common::Result<Json> parse_json_body(std::string_view body);

// Typed readers for a bare JSON value (messageTTL, deduplication, ...).
common::Result<int32_t> json_int32(const Json& j, std::string_view what);
common::Result<bool> json_bool(const Json& j, std::string_view what);
common::Result<std::set<std::string>> json_string_set(const Json& j, std::string_view what);

// Pulsar's BundlesData of `ns`: {"boundaries": [...], "numBundles": N}.
Json bundles_json(const broker::NamespaceName& ns);
Json to_json(const broker::ClusterInfo& c);
common::Result<broker::ClusterInfo> cluster_from_json(const Json& j);
Json to_json(const broker::TenantInfo& t);
common::Result<broker::TenantInfo> tenant_from_json(const Json& j);

Json to_json(const broker::RetentionPolicy& p);
common::Result<broker::RetentionPolicy> retention_from_json(const Json& j);
Json to_json(const broker::BacklogQuota& q);
common::Result<broker::BacklogQuota> backlog_quota_from_json(const Json& j);
Json to_json(const broker::PersistencePolicy& p);
common::Result<broker::PersistencePolicy> persistence_from_json(const Json& j);
Json to_json(const broker::PublishRate& r);
// A tenant's aggregate limits: {"publishRate": {publishThrottlingRateInMsg, publishThrottlingRateInByte}}.
Json to_json(const broker::TenantLimits& l);
common::Result<broker::TenantLimits> tenant_limits_from_json(const Json& j);
common::Result<broker::PublishRate> publish_rate_from_json(const Json& j);
Json to_json(const broker::DispatchRate& r);
common::Result<broker::DispatchRate> dispatch_rate_from_json(const Json& j);
Json to_json(const broker::AutoTopicCreation& a);
common::Result<broker::AutoTopicCreation> auto_topic_creation_from_json(const Json& j);
// Magnetar's own: {"mode": "off"|"sampled"|"all", "rate": 0.1,
// "retentionTimeInMinutes": ..., "retentionSizeInMB": ...}.
Json to_json(const broker::TracingPolicy& t);
common::Result<broker::TracingPolicy> tracing_from_json(const Json& j);

// Pulsar's Policies document (GET/PUT /admin/v2/namespaces/{t}/{ns}).
// Per-cluster maps (publishMaxMessageRate, topicDispatchRate, ...) are keyed
// by `cluster`.
Json to_json(const broker::NamespacePolicies& p, const std::string& cluster);
common::Result<broker::NamespacePolicies> policies_from_json(const Json& j);

// {"destination_storage": {...}, "message_age": {...}}, set quotas only.
Json backlog_quota_map(const broker::NamespacePolicies& p);

}  // namespace magnetar::admin
