// CONNECT: the handshake. Lookup and partition metadata: where a topic is
// served and how many partitions it has.
#include "broker/policies.h"
#include "broker/tenancy.h"
#include "broker/tracing.h"
#include "common/clock.h"
#include "protocol/pulsar/commands.h"
#include "protocol/pulsar/server/pulsar_connection.h"

namespace magnetar::protocol::pulsar {

using common::Result;
using common::Status;

void handle_connect(PulsarConnection& c, const proto::CommandConnect& cmd) {
  if (c.connected()) {
    c.close(common::Status::failed_precondition("CONNECT sent twice"));
    return;
  }
  broker::Credentials credentials;
  credentials.method = cmd.has_auth_method_name() && !cmd.auth_method_name().empty() ? cmd.auth_method_name() : "none";
  credentials.data = cmd.auth_data();
  credentials.peer = c.peer();
  // As Pulsar's AuthenticationProviderTls: a client that sends no token
  // over TLS with a certificate the trusted CAs signed (the handshake
  // checked it) has the certificate's CN as its role.
  std::string cn = c.tls_common_name();
  const bool by_certificate = !cn.empty() && (credentials.method == "none" || credentials.method == "tls");
  auto role = by_certificate ? common::Result<std::string>(std::move(cn))
                             : c.service().authenticator().authenticate(credentials);
  if (!role.is_ok()) {
    // As Pulsar: an ERROR without a request, then the connection closes.
    c.send(commands::error(static_cast<uint64_t>(-1), proto::AuthenticationError, role.status().message()));
    c.close(role.status());
    return;
  }
  c.role = std::move(*role);
  c.protocol_version = commands::negotiate_protocol_version(cmd.protocol_version());
  c.send(commands::connected(c.service().options().server_version, c.protocol_version,
                             static_cast<int32_t>(kDefaultMaxMessageSize)));
  c.client_version = cmd.client_version();
  c.connected_since_ms = common::wall_clock_ms();
  c.set_connected();
}

void handle_lookup(PulsarConnection& c, const proto::CommandLookupTopic& cmd) {
  auto topic = broker::TopicName::parse(cmd.topic());
  if (!topic) {
    c.send(commands::lookup_error(cmd.request_id(), proto::InvalidTopicName, topic.status().message()));
    return;
  }
  if (auto allowed = c.service().authorization().check(c.role, *topic, broker::TopicAction::kLookup);
      !allowed.is_ok()) {
    c.send(commands::lookup_error(cmd.request_id(), proto::AuthorizationError, allowed.message()));
    return;
  }
  broker::Ownership* ownership = c.service().broker().ownership();
  if (ownership == nullptr) {
    // A standalone node serves every topic: it is always here.
    c.send(commands::lookup_response(cmd.request_id(), c.service().service_url(), c.service().service_url_tls()));
    return;
  }
  // A cluster member names the owner, as Connect with authoritative set:
  // clients go there directly (pulsar-flex follows a Connect, not a Redirect).
  uint64_t request_id = cmd.request_id();
  ownership->owner_of(*topic, [reply = c.request_replier(), request_id](Result<broker::NodeEndpoints> owner) {
    reply([request_id, owner = std::move(owner)](PulsarConnection& conn) {
      if (!owner.is_ok()) {
        return conn.send(commands::lookup_error(request_id, server_error(owner.status()), owner.status().message()));
      }
      if (owner->here) {
        return conn.send(
            commands::lookup_response(request_id, conn.service().service_url(), conn.service().service_url_tls()));
      }
      if (owner->pulsar_url.empty() && owner->pulsar_tls_url.empty()) {
        return conn.send(commands::lookup_error(request_id, proto::ServiceNotReady,
                                                "the owner serves no Pulsar listener"));
      }
      conn.send(commands::lookup_response(request_id, owner->pulsar_url, owner->pulsar_tls_url));
    });
  });
}

namespace {

// A topic nobody created yet, asked for by a client that lets the broker
// create it: partitioned when the namespace's autoTopicCreation says
// "partitioned" (as Pulsar does), else 0 (the producer or consumer then
// creates it, or is refused, as a non-partitioned topic).
// Tenancy thread.
Result<int32_t> partitions_after_auto_creation(broker::Tenancy& tenancy, const broker::TopicName& topic) {
  auto policies = tenancy.get_policies(topic.ns);
  if (!policies.is_ok()) return policies.status();
  auto rule = policies->auto_topic_creation.value_or(broker::AutoTopicCreation{});
  if (!rule.allow || !rule.partitioned) return 0;
  Status created = tenancy.create_partitioned_topic(topic, rule.default_partitions);
  // Another client may have created it meanwhile.
  if (!created.is_ok() && created.code() != common::ErrorCode::kAlreadyExists) return created;
  return tenancy.get_partitions(topic);
}

void create_partitioned_if_policy_says(PulsarConnection& c, const broker::TopicName& topic, uint64_t request_id) {
  if (broker::is_trace_topic(topic)) return c.send(commands::partitioned_metadata_response(request_id, 0));
  broker::Tenancy* tenancy = c.service().tenancy();
  Status queued = c.service().on_metadata_thread([tenancy, topic, request_id, reply = c.request_replier()]() {
    Result<int32_t> partitions = partitions_after_auto_creation(*tenancy, topic);
    reply([request_id, partitions = std::move(partitions)](PulsarConnection& conn) {
      if (partitions.is_ok()) {
        return conn.send(commands::partitioned_metadata_response(request_id, static_cast<uint32_t>(*partitions)));
      }
      const Status& st = partitions.status();
      conn.send(commands::partitioned_metadata_error(request_id, topic_load_error(st), st.message()));
    });
  });
  if (!queued.is_ok()) c.send(commands::partitioned_metadata_error(request_id, proto::ServiceNotReady, queued.message()));
}

}  // namespace

void handle_partitioned_metadata(PulsarConnection& c, const proto::CommandPartitionedTopicMetadata& cmd) {
  auto topic = broker::TopicName::parse(cmd.topic());
  uint64_t request_id = cmd.request_id();
  if (!topic) {
    c.send(commands::partitioned_metadata_error(request_id, proto::InvalidTopicName, topic.status().message()));
    return;
  }
  if (auto allowed = c.service().authorization().check(c.role, *topic, broker::TopicAction::kLookup);
      !allowed.is_ok()) {
    c.send(commands::partitioned_metadata_error(request_id, proto::AuthorizationError, allowed.message()));
    return;
  }
  if (topic->is_partition()) {
    c.send(commands::partitioned_metadata_response(request_id, 0));
    return;
  }
  const bool may_create = cmd.metadata_auto_creation_enabled();
  // The metadata store answers on this reactor, never blocking it.
  c.service().store().get(broker::partitioned_topic_key(*topic), [reply = c.request_replier(), request_id,
                                                                  topic = *topic, may_create](
                                                                     common::Result<metadata::Record> r) {
    reply([request_id, topic, may_create, r = std::move(r)](PulsarConnection& conn) {
      if (r.is_ok()) {
        auto partitions = broker::decode_partitions(r->value);
        conn.send(commands::partitioned_metadata_response(request_id,
                                                          static_cast<uint32_t>(partitions.value_or(0))));
      } else if (r.status().code() == common::ErrorCode::kNotFound) {
        if (!may_create) return conn.send(commands::partitioned_metadata_response(request_id, 0));
        create_partitioned_if_policy_says(conn, topic, request_id);
      } else {
        conn.send(commands::partitioned_metadata_error(request_id, proto::MetadataError, r.status().message()));
      }
    });
  });
}

}  // namespace magnetar::protocol::pulsar
