// `magnetar admin tenants ...` and `magnetar admin clusters ...`.
#include <CLI/CLI.hpp>

#include "cli/admin_cli.h"
#include "cli/http_client.h"

namespace magnetar::cli {

void add_tenant_commands(CLI::App& admin, Command& run, std::shared_ptr<AdminOptions> options) {
  auto* tenants = admin.add_subcommand("tenants", "Tenants: who owns namespaces and which clusters they may use");
  tenants->require_subcommand(1);
  tenants->fallthrough();

  add_verb(*tenants, run, options, "list", "List tenants", []() -> common::Result<AdminRequest> {
    return AdminRequest{"GET", "/admin/v2/tenants", "", "", nullptr};
  });

  auto name = std::make_shared<std::string>();
  auto* get = add_verb(*tenants, run, options, "get", "Show a tenant's admin roles and allowed clusters",
                       [name]() -> common::Result<AdminRequest> {
                         return AdminRequest{"GET", "/admin/v2/tenants/" + escape_segment(*name), "", "", nullptr};
                       });
  get->add_option("tenant", *name, "Tenant name")->required();

  for (bool create : {true, false}) {
    struct Flags {
      std::string tenant;
      std::vector<std::string> roles;
      std::vector<std::string> clusters;
    };
    auto f = std::make_shared<Flags>();
    auto* verb = add_verb(*tenants, run, options, create ? "create" : "update",
                          create ? "Create a tenant" : "Replace a tenant's admin roles and allowed clusters",
                          [f, create]() -> common::Result<AdminRequest> {
                            Json body = Json::object();
                            body["adminRoles"] = f->roles;
                            // Left out on create, the server allows its own cluster.
                            if (!create || !f->clusters.empty()) body["allowedClusters"] = f->clusters;
                            return AdminRequest{create ? "PUT" : "POST", "/admin/v2/tenants/" + escape_segment(f->tenant),
                                                body.dump(),
                                                (create ? "Created tenant " : "Updated tenant ") + f->tenant, nullptr};
                          });
    verb->add_option("tenant", f->tenant, "Tenant name")->required();
    verb->add_option("-r,--admin-roles", f->roles, "Roles that administer the tenant (comma separated)")
        ->delimiter(',');
    verb->add_option("-c,--allowed-clusters", f->clusters,
                     "Clusters the tenant may use (comma separated; default on create: this cluster)")
        ->delimiter(',');
  }

  auto victim = std::make_shared<std::string>();
  auto* del = add_verb(*tenants, run, options, "delete", "Delete a tenant that has no namespaces",
                       [victim]() -> common::Result<AdminRequest> {
                         return AdminRequest{"DELETE", "/admin/v2/tenants/" + escape_segment(*victim), "",
                                             "Deleted tenant " + *victim, nullptr};
                       });
  del->add_option("tenant", *victim, "Tenant name")->required();

  // Aggregate limits over all the tenant's namespaces and topics.
  auto limited = std::make_shared<std::string>();
  auto* get_limits = add_verb(*tenants, run, options, "get-limits", "Show a tenant's aggregate limits",
                              [limited]() -> common::Result<AdminRequest> {
                                return AdminRequest{"GET", "/admin/v2/tenants/" + escape_segment(*limited) + "/limits",
                                                    "", "", nullptr};
                              });
  get_limits->add_option("tenant", *limited, "Tenant name")->required();
  auto used = std::make_shared<std::string>();
  auto* usage = add_verb(*tenants, run, options, "usage",
                         "Show what a tenant uses now: stored bytes, topics, subscriptions, producers, consumers, "
                         "connections",
                         [used]() -> common::Result<AdminRequest> {
                           return AdminRequest{"GET", "/admin/v2/tenants/" + escape_segment(*used) + "/usage", "", "",
                                               nullptr};
                         });
  usage->add_option("tenant", *used, "Tenant name")->required();
  struct LimitFlags {
    std::string tenant;
    int64_t msg_rate = -1;
    int64_t byte_rate = -1;
    int32_t max_producers = -1;
    int32_t max_consumers = -1;
    int32_t max_connections = -1;
    int32_t max_topics = -1;
    int32_t max_subscriptions = -1;
    std::string storage_quota = "-1";
    int64_t dispatch_msg_rate = -1;
    int64_t dispatch_byte_rate = -1;
    int32_t max_namespaces = -1;
    std::string max_message_size = "-1";
  };
  auto lf = std::make_shared<LimitFlags>();
  auto* set_limits = add_verb(
      *tenants, run, options, "set-limits",
      "Limit a tenant across all its namespaces and topics: publish and dispatch rates (clients are slowed, never "
      "refused), producers, consumers, connections, topics and subscriptions (more are refused), stored bytes "
      "(publishing is refused while over)",
      [lf]() -> common::Result<AdminRequest> {
        int64_t quota = -1, message = -1;
        if (lf->storage_quota != "-1") {
          auto q = parse_size_bytes(lf->storage_quota);
          if (!q.is_ok()) return q.status();
          quota = *q;
        }
        if (lf->max_message_size != "-1") {
          auto m = parse_size_bytes(lf->max_message_size);
          if (!m.is_ok()) return m.status();
          message = *m;
        }
        Json body{{"publishRate",
                   {{"publishThrottlingRateInMsg", lf->msg_rate}, {"publishThrottlingRateInByte", lf->byte_rate}}},
                  {"dispatchRate",
                   {{"dispatchThrottlingRateInMsg", lf->dispatch_msg_rate},
                    {"dispatchThrottlingRateInByte", lf->dispatch_byte_rate}}},
                  {"maxProducers", lf->max_producers},
                  {"maxConsumers", lf->max_consumers},
                  {"maxConnections", lf->max_connections},
                  {"maxTopics", lf->max_topics},
                  {"maxSubscriptions", lf->max_subscriptions},
                  {"storageQuotaBytes", quota},
                  {"maxNamespaces", lf->max_namespaces},
                  {"maxMessageSize", message}};
        return AdminRequest{"POST", "/admin/v2/tenants/" + escape_segment(lf->tenant) + "/limits", body.dump(),
                            "Set the limits of tenant " + lf->tenant, nullptr};
      });
  set_limits->add_option("tenant", lf->tenant, "Tenant name")->required();
  set_limits->add_option("--publish-rate-msgs", lf->msg_rate, "Messages per second (-1: no limit)")
      ->capture_default_str();
  set_limits->add_option("--publish-rate-bytes", lf->byte_rate, "Bytes per second (-1: no limit)")
      ->capture_default_str();
  set_limits->add_option("--max-producers", lf->max_producers, "Producers over all its topics (-1: no limit)")
      ->capture_default_str();
  set_limits->add_option("--max-consumers", lf->max_consumers, "Consumers over all its topics (-1: no limit)")
      ->capture_default_str();
  set_limits->add_option("--max-connections", lf->max_connections,
                         "Client connections using the tenant, every protocol (-1: no limit)")
      ->capture_default_str();
  set_limits->add_option("--dispatch-rate-msgs", lf->dispatch_msg_rate,
                         "Messages per second delivered over all its subscriptions (-1: no limit)")
      ->capture_default_str();
  set_limits->add_option("--dispatch-rate-bytes", lf->dispatch_byte_rate,
                         "Bytes per second delivered over all its subscriptions (-1: no limit)")
      ->capture_default_str();
  set_limits->add_option("--max-topics", lf->max_topics,
                         "Topics over all its namespaces, a partitioned topic counting its partitions (-1: no limit)")
      ->capture_default_str();
  set_limits->add_option("--max-subscriptions", lf->max_subscriptions,
                         "Subscriptions over all its topics, Kafka groups and AMQP queues included (-1: no limit)")
      ->capture_default_str();
  set_limits->add_option("--storage-quota", lf->storage_quota,
                         "Stored bytes over all its topics, e.g. 10G (-1: no limit)")
      ->capture_default_str();
  set_limits->add_option("--max-namespaces", lf->max_namespaces, "Namespaces of the tenant (-1: no limit)")
      ->capture_default_str();
  set_limits->add_option("--max-message-size", lf->max_message_size,
                         "Largest message (a Pulsar batch, a Kafka record batch) one publish may store, e.g. 1M "
                         "(-1: the node's own largest, 5 MiB)")
      ->capture_default_str();
  auto unlimited = std::make_shared<std::string>();
  auto* remove_limits = add_verb(*tenants, run, options, "remove-limits", "Remove a tenant's aggregate limits",
                                 [unlimited]() -> common::Result<AdminRequest> {
                                   return AdminRequest{"DELETE",
                                                       "/admin/v2/tenants/" + escape_segment(*unlimited) + "/limits",
                                                       "", "Removed the limits of tenant " + *unlimited, nullptr};
                                 });
  remove_limits->add_option("tenant", *unlimited, "Tenant name")->required();
}

void add_cluster_commands(CLI::App& admin, Command& run, std::shared_ptr<AdminOptions> options) {
  auto* clusters = admin.add_subcommand("clusters", "Clusters known to this node");
  clusters->require_subcommand(1);
  clusters->fallthrough();

  add_verb(*clusters, run, options, "list", "List clusters", []() -> common::Result<AdminRequest> {
    return AdminRequest{"GET", "/admin/v2/clusters", "", "", nullptr};
  });
  auto name = std::make_shared<std::string>();
  auto* get = add_verb(*clusters, run, options, "get", "Show a cluster's service URLs",
                       [name]() -> common::Result<AdminRequest> {
                         return AdminRequest{"GET", "/admin/v2/clusters/" + escape_segment(*name), "", "", nullptr};
                       });
  get->add_option("cluster", *name, "Cluster name")->required();

  for (bool create : {true, false}) {
    struct Flags {
      std::string cluster, url, url_tls, broker_url, broker_url_tls, trust_certs, cert_file, key_file;
      bool tls = false;
      bool insecure = false;
    };
    auto f = std::make_shared<Flags>();
    auto* verb = add_verb(*clusters, run, options, create ? "create" : "update",
                          create ? "Add a cluster" : "Replace a cluster's service URLs",
                          [f, create]() -> common::Result<AdminRequest> {
                            Json body{{"serviceUrl", f->url},
                                      {"serviceUrlTls", f->url_tls},
                                      {"brokerServiceUrl", f->broker_url},
                                      {"brokerServiceUrlTls", f->broker_url_tls},
                                      {"brokerClientTlsEnabled", f->tls},
                                      {"tlsAllowInsecureConnection", f->insecure},
                                      {"brokerClientTrustCertsFilePath", f->trust_certs},
                                      {"brokerClientCertificateFilePath", f->cert_file},
                                      {"brokerClientKeyFilePath", f->key_file}};
                            return AdminRequest{create ? "PUT" : "POST", "/admin/v2/clusters/" + escape_segment(f->cluster),
                                                body.dump(), (create ? "Created cluster " : "Updated cluster ") + f->cluster,
                                                nullptr};
                          });
    verb->add_option("cluster", f->cluster, "Cluster name")->required();
    verb->add_option("--service-url", f->url, "HTTP service URL, e.g. http://host:8080");
    verb->add_option("--service-url-tls", f->url_tls, "HTTPS service URL");
    verb->add_option("--broker-url", f->broker_url, "Pulsar protocol URL, e.g. pulsar://host:6650");
    verb->add_option("--broker-url-tls", f->broker_url_tls, "Pulsar protocol TLS URL");
    // pulsar-admin's names for the geo-replication link's TLS.
    verb->add_flag("--tls-enable", f->tls, "Geo-replicators reach this cluster over --broker-url-tls");
    verb->add_flag("--tls-allow-insecure", f->insecure,
                   "Geo-replicators accept any certificate from it (encrypted, not authenticated)");
    verb->add_option("--tls-trust-certs-filepath", f->trust_certs,
                     "PEM CAs its certificate must chain to (default: the system's)");
    verb->add_option("--tls-cert-filepath", f->cert_file,
                     "PEM certificate geo-replicators present to it (one that requires client certificates)");
    verb->add_option("--tls-key-filepath", f->key_file, "PEM key of --tls-cert-filepath");
  }

  auto victim = std::make_shared<std::string>();
  auto* del = add_verb(*clusters, run, options, "delete", "Delete a cluster no tenant allows",
                       [victim]() -> common::Result<AdminRequest> {
                         return AdminRequest{"DELETE", "/admin/v2/clusters/" + escape_segment(*victim), "",
                                             "Deleted cluster " + *victim, nullptr};
                       });
  del->add_option("cluster", *victim, "Cluster name")->required();

  // Namespace isolation policies (pulsar-admin's ns-isolation-policy).
  struct Isolation {
    std::string cluster, policy;
    std::vector<std::string> namespaces, primary, secondary;
    uint32_t min_limit = 1;
  };
  auto iso = std::make_shared<Isolation>();
  auto isolation_path = [iso]() {
    return "/admin/v2/clusters/" + escape_segment(iso->cluster) + "/namespaceIsolationPolicies" +
           (iso->policy.empty() ? "" : "/" + escape_segment(iso->policy));
  };
  auto* list = add_verb(*clusters, run, options, "isolation-policies",
                        "Show a cluster's namespace isolation policies",
                        [isolation_path]() -> common::Result<AdminRequest> {
                          return AdminRequest{"GET", isolation_path(), "", "", nullptr};
                        });
  list->add_option("cluster", iso->cluster, "Cluster name")->required();
  auto* set = add_verb(
      *clusters, run, options, "set-isolation-policy",
      "Pin namespaces to brokers: their bundles go only to the primary brokers (secondary ones while fewer than "
      "--min-limit primaries are alive)",
      [iso, isolation_path]() -> common::Result<AdminRequest> {
        Json body{{"namespaces", iso->namespaces},
                  {"primary", iso->primary},
                  {"secondary", iso->secondary},
                  {"auto_failover_policy",
                   {{"policy_type", "min_available"},
                    {"parameters", {{"min_limit", std::to_string(iso->min_limit)}, {"usage_threshold", "100"}}}}}};
        return AdminRequest{"POST", isolation_path(), body.dump(), "Set isolation policy " + iso->policy, nullptr};
      });
  set->add_option("cluster", iso->cluster, "Cluster name")->required();
  set->add_option("policy", iso->policy, "Policy name")->required();
  set->add_option("--namespaces", iso->namespaces, "Regular expressions of tenant/namespace (comma separated)")
      ->required()->delimiter(',');
  set->add_option("--primary", iso->primary,
                  "Regular expressions of brokers: node id, host or host:web-port (comma separated)")
      ->required()->delimiter(',');
  set->add_option("--secondary", iso->secondary, "Brokers used while too few primaries are alive")->delimiter(',');
  set->add_option("--min-limit", iso->min_limit, "Primaries that must be alive before secondaries are used")
      ->capture_default_str();
  auto* remove = add_verb(*clusters, run, options, "delete-isolation-policy", "Remove a namespace isolation policy",
                          [iso, isolation_path]() -> common::Result<AdminRequest> {
                            return AdminRequest{"DELETE", isolation_path(), "",
                                                "Deleted isolation policy " + iso->policy, nullptr};
                          });
  remove->add_option("cluster", iso->cluster, "Cluster name")->required();
  remove->add_option("policy", iso->policy, "Policy name")->required();
}

}  // namespace magnetar::cli
