// GeoReplication: replicates the topics of namespaces whose
// replication_clusters name other clusters to those clusters (Pulsar's
// geo-replication).
//
// For every loaded persistent topic whose effective policies list the local
// cluster and others, the topic carries one Replicator per remote cluster
// (replicator.h), started when the policies are applied (at load and on
// every policy change) and stopped, its cursor deleted, when a cluster
// leaves the list. A cluster must be registered (/admin/v2/clusters) with a
// Pulsar service URL; the replicator connects to it there.
//
// Blocking work (reading a cluster's record, connecting a socket) runs on
// this component's own thread; everything else on the topics' reactors.
//
// Threads: on_policies on a topic's home reactor; connect from any reactor.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "broker/broker_service.h"
#include "broker/policies.h"
#include "broker/tenancy.h"
#include "broker/topic.h"
#include "common/result.h"
#include "georep/config_sync.h"
#include "runtime/component.h"
#include "runtime/reactor.h"
#include "runtime/tls_context.h"
#include "runtime/worker_thread.h"

namespace magnetar::georep {

struct GeoReplicationOptions {
  std::string local_cluster;
  // Entries sent to the remote cluster and not yet acknowledged, per replicator.
  size_t max_in_flight = 1000;
  // ... and bytes of them: a replicator stops reading at this many (at
  // least one entry goes out whatever its size).
  size_t max_in_flight_bytes = 16u << 20;
  // Entries read from the log at once.
  size_t read_batch = 100;
  // Waits between attempts to reach a remote cluster: doubling from min to max.
  std::chrono::milliseconds min_backoff{100};
  std::chrono::milliseconds max_backoff{5000};
  std::chrono::milliseconds connect_timeout{5000};
  // A connected link is pinged this often; one silent for three times this
  // long (a cut cable: no error, no answer) is dropped and made again.
  std::chrono::milliseconds keepalive{5000};
  // How often tenants whose home is this cluster are sent to the others
  // they allow (config_sync.h); 0: never.
  std::chrono::milliseconds config_sync_interval{2000};
  // How often replicated subscriptions' acknowledgements are sent to the
  // other clusters (replicator.h; Pulsar's
  // replicatedSubscriptionsSnapshotFrequencyMillis); 0: never.
  std::chrono::milliseconds subscription_sync_interval{1000};
};

// The token a cluster record's authentication settings give replicators
// (and configuration sync): Pulsar's token plugin with "token:<jwt>",
// "file:///path" or the token itself; "" without a plugin.
common::Result<std::string> link_token(const broker::ClusterInfo& info, const std::string& cluster);

class GeoReplication final : public runtime::Component {
 public:
  // REQUIRES: `tenancy` and `store` (the metadata store) outlive this.
  GeoReplication(broker::Tenancy& tenancy, metadata::Store& store, GeoReplicationOptions options);
  ~GeoReplication() override;

  const GeoReplicationOptions& options() const { return options_; }

  // BrokerService's topic policies hook: makes and drops `topic`'s replicators.
  void on_policies(broker::Topic& topic, const broker::NamespacePolicies& policies);

  // A socket connected to a remote cluster and the token (empty: none) its
  // record says to CONNECT with.
  struct RemoteSocket {
    int fd = -1;
    std::string token;
    // Set: speak TLS over the socket as the client, to `server_name`.
    std::shared_ptr<const runtime::TlsContext> tls;
    std::string server_name;
  };
  // Connects a socket to the member of `cluster` that serves `topic`: a
  // Pulsar LOOKUP at its broker service URL as registered names it (a
  // standalone node names itself; a cluster member the topic's owner,
  // following redirects). `done` runs on `reactor` with the connected
  // socket (the caller owns it) or why not: kNotFound for a cluster that is
  // not registered or names no pulsar:// URL, kInvalidArgument for
  // authentication parameters that cannot be used, kUnavailable when it
  // cannot be reached within connect_timeout or the lookup fails. The
  // socket is closed if `reactor` stops first.
  void connect(const std::string& cluster, const std::string& topic, runtime::Reactor& reactor,
               std::function<void(common::Result<RemoteSocket>)> done);

  // Sends `body`, replicated subscriptions' acknowledgements on `topic`
  // (replicator.h), to `cluster`'s member that serves it. `done` runs on
  // `reactor` with the outcome.
  void send_acks(const std::string& cluster, const broker::TopicName& topic, std::string body,
                 runtime::Reactor& reactor, std::function<void(common::Status)> done);

  // Loads, in the background, every persistent topic of the namespaces
  // replicated to another cluster, so that their replicators resume after a
  // restart without waiting for a client to use each topic. Call once the
  // broker has started. REQUIRES: `broker` outlives this.
  void resume(broker::BrokerService& broker);

  // Before start(): whether this member sends its tenants' configuration
  // to the other clusters (config_sync.h); unset: it does.
  void set_config_leads(std::function<bool()> leads) { config_leads_ = std::move(leads); }

  std::string_view name() const override { return "geo-replication"; }
  common::Status start() override;
  void stop() override;

 private:
  broker::Tenancy& tenancy_;
  metadata::Store& store_;
  const GeoReplicationOptions options_;
  std::unique_ptr<runtime::WorkerThread> worker_;
  std::unique_ptr<ConfigSync> config_sync_;
  std::function<bool()> config_leads_;
  std::atomic<bool> stopping_{false};
};

}  // namespace magnetar::georep
