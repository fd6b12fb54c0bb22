#include "broker/tenancy.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "broker/bundle_layout.h"
#include "broker/ownership.h"
#include "broker/trace_record.h"
#include "broker/tracing.h"
#include "common/logging.h"
#include "ledger/managed_ledger.h"
#include "metadata/blocking.h"

namespace magnetar::broker {

using common::ErrorCode;
using common::Result;
using common::Status;
namespace md = metadata::blocking;

namespace {

constexpr std::string_view kBootstrapKey = "/admin/bootstrap";
constexpr int kMaxCasAttempts = 32;

// Before retrying a compare-and-set that lost a race: a random pause that
// grows with the attempt (up to ~50 ms), so racing writers spread out
// instead of colliding again. Runs on the tenancy thread, which may block.
void backoff(int attempt) {
  thread_local std::minstd_rand rng(std::random_device{}());
  int cap_ms = std::min(50, 1 << std::min(attempt, 6));
  std::this_thread::sleep_for(std::chrono::microseconds(rng() % (cap_ms * 1000 + 1)));
}

// Store errors in the words of the thing asked for: a missing key becomes
// "tenant 'x' does not exist", a taken one "tenant 'x' already exists".
Status named(const Status& st, std::string_view what) {
  switch (st.code()) {
    case ErrorCode::kNotFound: return Status::not_found(std::string(what) + " does not exist");
    case ErrorCode::kAlreadyExists: return Status::already_exists(std::string(what) + " already exists");
    default: return st;
  }
}

std::string quoted(std::string_view kind, std::string_view name) {
  return std::string(kind) + " '" + std::string(name) + "'";
}

}  // namespace

std::string cluster_key(std::string_view cluster) { return "/admin/clusters/" + std::string(cluster); }
std::string tenant_key(std::string_view tenant) { return "/admin/tenants/" + std::string(tenant); }
std::string tenant_limits_key(std::string_view tenant) { return "/admin/tenant-limits/" + std::string(tenant); }
std::string namespace_key(const NamespaceName& ns) { return "/admin/policies/" + ns.to_string(); }

std::string partitioned_topic_key(const TopicName& topic) {
  return "/admin/partitioned-topics/" + topic.ns.to_string() + "/" + std::string(domain_name(topic.domain)) + "/" +
         topic.base().local;
}

std::string managed_ledger_key(const TopicName& topic) {
  return "/managed-ledgers/" + topic.ns.to_string() + "/" + std::string(domain_name(topic.domain)) + "/" +
         topic.local;
}

std::string topic_policies_prefix(const NamespaceName& ns) { return "/admin/topic-policies/" + ns.to_string() + "/"; }

std::string topic_policies_key(const TopicName& topic) {
  return topic_policies_prefix(topic.ns) + std::string(domain_name(topic.domain)) + "/" + topic.local;
}

Tenancy::Tenancy(metadata::Store& store, BootstrapDefaults defaults)
    : store_(store), defaults_(std::move(defaults)) {}

Tenancy::~Tenancy() { stop(); }

Status Tenancy::start() {
  MAGNETAR_RETURN_IF_ERROR(ensure_defaults());
  worker_ = std::make_unique<runtime::WorkerThread>("tenancy", 4096);
  return Status::ok();
}

void Tenancy::stop() {
  if (worker_) worker_->stop();
}

Status Tenancy::submit(runtime::Task task) {
  if (!worker_) return Status::unavailable("tenancy is not running");
  return worker_->post(std::move(task));
}

Status Tenancy::ensure_defaults() {
  auto done = md::get(store_, std::string(kBootstrapKey));
  if (done.is_ok()) return Status::ok();
  if (done.status().code() != ErrorCode::kNotFound) return done.status();

  // Each step tolerates what an interrupted earlier first start left behind.
  auto tolerate_exists = [](const Status& st) {
    return st.is_ok() || st.code() == ErrorCode::kAlreadyExists ? Status::ok() : st;
  };
  MAGNETAR_RETURN_IF_ERROR(tolerate_exists(create_cluster(defaults_.cluster, defaults_.cluster_info)));
  TenantInfo tenant{{}, {defaults_.cluster}};
  for (auto [t, ns] : {std::pair{kPublicTenant, kDefaultNamespace}, std::pair{kSystemTenant, kSystemNamespace}}) {
    MAGNETAR_RETURN_IF_ERROR(tolerate_exists(create_tenant(std::string(t), tenant)));
    NamespacePolicies policies;
    policies.replication_clusters = {defaults_.cluster};
    MAGNETAR_RETURN_IF_ERROR(
        tolerate_exists(create_namespace(NamespaceName{std::string(t), std::string(ns)}, policies)));
  }
  auto marked = md::put(store_, std::string(kBootstrapKey), "1", {metadata::kMustNotExist});
  if (!marked.is_ok() && marked.status().code() != ErrorCode::kAlreadyExists) return marked.status();
  MLOG_INFO("first start: created cluster '{}', tenants public and pulsar, namespaces public/default and "
            "pulsar/system",
            defaults_.cluster);
  return Status::ok();
}

// ---- clusters ----

Result<std::vector<std::string>> Tenancy::list_clusters() { return md::list_children(store_, "/admin/clusters"); }

Result<ClusterInfo> Tenancy::get_cluster(const std::string& cluster) {
  MAGNETAR_RETURN_IF_ERROR(validate_entity_name(cluster, "cluster"));
  auto r = md::get(store_, cluster_key(cluster));
  if (!r.is_ok()) return named(r.status(), quoted("cluster", cluster));
  return decode_cluster(r->value);
}

Status Tenancy::create_cluster(const std::string& cluster, const ClusterInfo& info) {
  MAGNETAR_RETURN_IF_ERROR(validate_entity_name(cluster, "cluster"));
  auto r = md::put(store_, cluster_key(cluster), encode_cluster(info), {metadata::kMustNotExist});
  return r.is_ok() ? Status::ok() : named(r.status(), quoted("cluster", cluster));
}

Status Tenancy::update_cluster(const std::string& cluster, const ClusterInfo& info) {
  auto current = md::get(store_, cluster_key(cluster));
  if (!current.is_ok()) return named(current.status(), quoted("cluster", cluster));
  auto r = md::put(store_, cluster_key(cluster), encode_cluster(info), {current->stat.version});
  return r.is_ok() ? Status::ok() : named(r.status(), quoted("cluster", cluster));
}

Status Tenancy::delete_cluster(const std::string& cluster) {
  MAGNETAR_RETURN_IF_ERROR(validate_entity_name(cluster, "cluster"));
  auto current = md::get(store_, cluster_key(cluster));
  if (!current.is_ok()) return named(current.status(), quoted("cluster", cluster));
  if (cluster == defaults_.cluster) {
    return Status::failed_precondition("cluster '" + cluster + "' is the cluster this node belongs to");
  }
  auto tenants = list_tenants();
  if (!tenants.is_ok()) return tenants.status();
  for (const auto& t : *tenants) {
    auto info = get_tenant(t);
    if (info.is_ok() && info->allowed_clusters.count(cluster)) {
      return Status::failed_precondition("cluster '" + cluster + "' is still allowed by tenant '" + t + "'");
    }
  }
  return named(md::del(store_, cluster_key(cluster), current->stat.version), quoted("cluster", cluster));
}

namespace {
// Set while this thread applies a home cluster's configuration: its writes
// are the home's own edits.
thread_local bool applying_home_configuration = false;

// Sets applying_home_configuration for its scope.
struct ApplyingHomeConfiguration {
  ApplyingHomeConfiguration() { applying_home_configuration = true; }
  ~ApplyingHomeConfiguration() { applying_home_configuration = false; }
};
}  // namespace

Status Tenancy::check_home(const std::string& tenant) {
  if (applying_home_configuration) return Status::ok();
  auto r = md::get(store_, tenant_key(tenant));
  if (!r.is_ok()) return Status::ok();  // the operation itself says what is missing
  auto t = decode_tenant(r->value);
  if (!t.is_ok() || t->home_cluster.empty() || t->home_cluster == local_cluster()) return Status::ok();
  return Status::failed_precondition("tenant '" + tenant + "' is configured on its home cluster '" + t->home_cluster +
                                     "', not on '" + local_cluster() + "': make the change there (to move its " +
                                     "home here, update the tenant with homeCluster '" + local_cluster() + "')");
}

Status Tenancy::check_clusters_exist(const std::set<std::string>& clusters) {
  if (applying_home_configuration) return Status::ok();  // the home knows them; this cluster may not
  for (const auto& c : clusters) {
    MAGNETAR_RETURN_IF_ERROR(validate_entity_name(c, "cluster"));
    auto r = md::get(store_, cluster_key(c));
    if (r.status().code() == ErrorCode::kNotFound) {
      return Status::failed_precondition("cluster '" + c + "' does not exist");
    }
    if (!r.is_ok()) return r.status();
  }
  return Status::ok();
}

// ---- tenants ----

Result<std::vector<std::string>> Tenancy::list_tenants() { return md::list_children(store_, "/admin/tenants"); }

Result<TenantInfo> Tenancy::get_tenant(const std::string& tenant) {
  MAGNETAR_RETURN_IF_ERROR(validate_entity_name(tenant, "tenant"));
  auto r = md::get(store_, tenant_key(tenant));
  if (!r.is_ok()) return named(r.status(), quoted("tenant", tenant));
  return decode_tenant(r->value);
}

Status Tenancy::create_tenant(const std::string& tenant, const TenantInfo& info) {
  MAGNETAR_RETURN_IF_ERROR(validate_entity_name(tenant, "tenant"));
  MAGNETAR_RETURN_IF_ERROR(check_clusters_exist(info.allowed_clusters));
  auto r = md::put(store_, tenant_key(tenant), encode_tenant(info), {metadata::kMustNotExist});
  return r.is_ok() ? Status::ok() : named(r.status(), quoted("tenant", tenant));
}

Status Tenancy::update_tenant(const std::string& tenant, const TenantInfo& update) {
  MAGNETAR_RETURN_IF_ERROR(validate_entity_name(tenant, "tenant"));
  auto current = md::get(store_, tenant_key(tenant));
  if (!current.is_ok()) return named(current.status(), quoted("tenant", tenant));
  TenantInfo info = update;
  std::set<std::string> added = info.allowed_clusters;  // clusters allowed already may stay unregistered here
  if (auto was = decode_tenant(current->value); was.is_ok()) {
    if (info.home_cluster.empty()) info.home_cluster = was->home_cluster;  // a client that does not know homes
    for (const auto& c : was->allowed_clusters) added.erase(c);
  }
  if (info.home_cluster != local_cluster()) MAGNETAR_RETURN_IF_ERROR(check_home(tenant));
  MAGNETAR_RETURN_IF_ERROR(check_clusters_exist(added));
  auto r = md::put(store_, tenant_key(tenant), encode_tenant(info), {current->stat.version});
  return r.is_ok() ? Status::ok() : named(r.status(), quoted("tenant", tenant));
}

Status Tenancy::delete_tenant(const std::string& tenant) {
  MAGNETAR_RETURN_IF_ERROR(validate_entity_name(tenant, "tenant"));
  auto current = md::get(store_, tenant_key(tenant));
  if (!current.is_ok()) return named(current.status(), quoted("tenant", tenant));
  MAGNETAR_RETURN_IF_ERROR(check_home(tenant));
  auto namespaces = md::list_children(store_, "/admin/policies/" + tenant);
  if (!namespaces.is_ok()) return namespaces.status();
  if (!namespaces->empty()) {
    return Status::failed_precondition("tenant '" + tenant + "' still has " + std::to_string(namespaces->size()) +
                                       " namespace(s); delete them first");
  }
  MAGNETAR_RETURN_IF_ERROR(remove_tenant_limits(tenant));
  return named(md::del(store_, tenant_key(tenant), current->stat.version), quoted("tenant", tenant));
}

Result<TenantLimits> Tenancy::get_tenant_limits(const std::string& tenant) {
  MAGNETAR_RETURN_IF_ERROR(validate_entity_name(tenant, "tenant"));
  auto t = md::get(store_, tenant_key(tenant));
  if (!t.is_ok()) return named(t.status(), quoted("tenant", tenant));
  auto r = md::get(store_, tenant_limits_key(tenant));
  if (r.status().code() == ErrorCode::kNotFound) return TenantLimits{};
  if (!r.is_ok()) return r.status();
  return decode_tenant_limits(r->value);
}

Status Tenancy::set_tenant_limits(const std::string& tenant, const TenantLimits& limits) {
  MAGNETAR_RETURN_IF_ERROR(validate_entity_name(tenant, "tenant"));
  MAGNETAR_RETURN_IF_ERROR(check_home(tenant));
  MAGNETAR_RETURN_IF_ERROR(validate(limits));
  auto t = md::get(store_, tenant_key(tenant));
  if (!t.is_ok()) return named(t.status(), quoted("tenant", tenant));
  auto r = md::put(store_, tenant_limits_key(tenant), encode_tenant_limits(limits), {});
  return r.is_ok() ? Status::ok() : r.status();
}

Status Tenancy::remove_tenant_limits(const std::string& tenant) {
  MAGNETAR_RETURN_IF_ERROR(validate_entity_name(tenant, "tenant"));
  MAGNETAR_RETURN_IF_ERROR(check_home(tenant));
  auto current = md::get(store_, tenant_limits_key(tenant));
  if (current.status().code() == ErrorCode::kNotFound) return Status::ok();
  if (!current.is_ok()) return current.status();
  Status st = md::del(store_, tenant_limits_key(tenant), current->stat.version);
  return st.code() == ErrorCode::kNotFound ? Status::ok() : st;
}

// ---- namespaces ----

Result<std::vector<std::string>> Tenancy::list_namespaces(const std::string& tenant) {
  MAGNETAR_RETURN_IF_ERROR(validate_entity_name(tenant, "tenant"));
  auto t = md::get(store_, tenant_key(tenant));
  if (!t.is_ok()) return named(t.status(), quoted("tenant", tenant));
  auto children = md::list_children(store_, "/admin/policies/" + tenant);
  if (!children.is_ok()) return children.status();
  std::vector<std::string> out;
  out.reserve(children->size());
  for (const auto& c : *children) out.push_back(tenant + "/" + c);
  return out;
}

Status Tenancy::require_namespace(const NamespaceName& ns) {
  auto r = md::get(store_, namespace_key(ns));
  return r.is_ok() ? Status::ok() : named(r.status(), quoted("namespace", ns.to_string()));
}

Result<NamespacePolicies> Tenancy::get_policies(const NamespaceName& ns) {
  auto r = md::get(store_, namespace_key(ns));
  if (!r.is_ok()) return named(r.status(), quoted("namespace", ns.to_string()));
  return decode_policies(r->value);
}

Status Tenancy::create_namespace(const NamespaceName& ns, const NamespacePolicies& policies) {
  MAGNETAR_RETURN_IF_ERROR(validate(policies));
  auto tenant = get_tenant(ns.tenant);
  if (!tenant.is_ok()) return tenant.status();
  MAGNETAR_RETURN_IF_ERROR(check_home(ns.tenant));
  for (const auto& c : policies.replication_clusters) {
    if (!tenant->allowed_clusters.count(c)) {
      return Status::failed_precondition("cluster '" + c + "' is not allowed for tenant '" + ns.tenant + "'");
    }
  }
  auto limits = get_tenant_limits(ns.tenant);
  if (!limits.is_ok()) return limits.status();
  if (limits->max_namespaces >= 0) {
    auto existing = md::list_children(store_, "/admin/policies/" + ns.tenant);
    if (!existing.is_ok()) return existing.status();
    if (static_cast<int64_t>(existing->size()) >= limits->max_namespaces) {
      return Status::failed_precondition("Tenant " + ns.tenant + " reached max namespaces limit (" +
                                         std::to_string(limits->max_namespaces) + ")");
    }
  }
  auto r = md::put(store_, namespace_key(ns), encode_policies(policies), {metadata::kMustNotExist});
  return r.is_ok() ? Status::ok() : named(r.status(), quoted("namespace", ns.to_string()));
}

Status Tenancy::delete_namespace(const NamespaceName& ns) {
  auto current = md::get(store_, namespace_key(ns));
  if (!current.is_ok()) return named(current.status(), quoted("namespace", ns.to_string()));
  MAGNETAR_RETURN_IF_ERROR(check_home(ns.tenant));
  for (TopicDomain d : {TopicDomain::kPersistent, TopicDomain::kNonPersistent}) {
    auto topics = list_topics(ns, d);
    if (!topics.is_ok()) return topics.status();
    if (!topics->empty()) {
      return Status::failed_precondition("namespace '" + ns.to_string() + "' still has " +
                                         std::to_string(topics->size()) + " topic(s); delete them first");
    }
  }
  MAGNETAR_RETURN_IF_ERROR(
      named(md::del(store_, namespace_key(ns), current->stat.version), quoted("namespace", ns.to_string())));
  // Nor its split bundles or their owners (a cluster's, broker/bundle_ownership.h),
  // nor overrides left by topics that are gone.
  Status layout = md::del(store_, layout_key(ns));
  if (!layout.is_ok() && layout.code() != ErrorCode::kNotFound) {
    MLOG_WARN("namespace {} deleted, but not its bundle layout: {}", ns.to_string(), layout.to_string());
  }
  const std::string bundles = bundle_owners_key(ns);
  if (auto owned = md::list_children(store_, bundles); owned.is_ok()) {
    for (const auto& range : *owned) {
      Status st = md::del(store_, bundles + "/" + range);
      if (!st.is_ok() && st.code() != ErrorCode::kNotFound) {
        MLOG_WARN("namespace {} deleted, but not its bundle {}'s owner: {}", ns.to_string(), range, st.to_string());
      }
    }
  }
  for (TopicDomain d : {TopicDomain::kPersistent, TopicDomain::kNonPersistent}) {
    std::string parent = "/admin/topic-policies/" + ns.to_string() + "/" + std::string(domain_name(d));
    auto left = md::list_children(store_, parent);
    if (!left.is_ok()) continue;
    for (const auto& topic : *left) {
      Status st = md::del(store_, parent + "/" + topic);
      if (!st.is_ok() && st.code() != ErrorCode::kNotFound) {
        MLOG_WARN("namespace {} deleted, but not the overrides of topic {}: {}", ns.to_string(), topic,
                  st.to_string());
      }
    }
  }
  return Status::ok();
}

Status Tenancy::update_policies(const NamespaceName& ns, const std::function<Status(NamespacePolicies&)>& change) {
  MAGNETAR_RETURN_IF_ERROR(check_home(ns.tenant));
  for (int attempt = 0; attempt < kMaxCasAttempts; ++attempt) {
    auto current = md::get(store_, namespace_key(ns));
    if (!current.is_ok()) return named(current.status(), quoted("namespace", ns.to_string()));
    auto policies = decode_policies(current->value);
    if (!policies.is_ok()) return policies.status();
    MAGNETAR_RETURN_IF_ERROR(change(*policies));
    MAGNETAR_RETURN_IF_ERROR(validate(*policies));
    auto r = md::put(store_, namespace_key(ns), encode_policies(*policies), {current->stat.version});
    if (r.is_ok()) return Status::ok();
    if (r.status().code() != ErrorCode::kFailedPrecondition) {
      return named(r.status(), quoted("namespace", ns.to_string()));
    }
    backoff(attempt);
  }
  return Status::unavailable("namespace '" + ns.to_string() + "' changed " + std::to_string(kMaxCasAttempts) +
                             " times while updating its policies; try again");
}

// ---- configuration sync ----

Result<TenantConfiguration> Tenancy::configuration_of(const std::string& tenant) {
  TenantConfiguration config;
  auto info = get_tenant(tenant);
  if (!info.is_ok()) return info.status();
  config.info = std::move(*info);
  if (auto l = md::get(store_, tenant_limits_key(tenant)); l.is_ok()) {
    auto limits = decode_tenant_limits(l->value);
    if (!limits.is_ok()) return limits.status();
    config.limits = *limits;
  } else if (l.status().code() != ErrorCode::kNotFound) {
    return l.status();
  }
  auto namespaces = list_namespaces(tenant);
  if (!namespaces.is_ok()) return namespaces.status();
  for (const std::string& full : *namespaces) {
    auto ns = NamespaceName::parse(full);
    if (!ns.is_ok()) continue;
    auto policies = get_policies(*ns);
    if (policies.status().code() == ErrorCode::kNotFound) continue;  // deleted meanwhile
    if (!policies.is_ok()) return policies.status();
    config.namespaces.emplace(full, std::move(*policies));
    for (TopicDomain domain : {TopicDomain::kPersistent, TopicDomain::kNonPersistent}) {
      auto partitioned = list_partitioned_topics(*ns, domain);
      if (!partitioned.is_ok()) continue;
      for (const std::string& name : *partitioned) {
        auto topic = TopicName::parse(name);
        if (!topic.is_ok()) continue;
        if (auto n = get_partitions(*topic); n.is_ok() && *n > 0) config.partitioned_topics.emplace(name, *n);
      }
    }
    MAGNETAR_RETURN_IF_ERROR(stored_topic_policies(*ns, config.topic_policies));
  }
  return config;
}

Status Tenancy::stored_topic_policies(const NamespaceName& ns, std::map<std::string, NamespacePolicies>& out) {
  for (TopicDomain domain : {TopicDomain::kPersistent, TopicDomain::kNonPersistent}) {
    const std::string folder = topic_policies_prefix(ns) + std::string(domain_name(domain));
    auto locals = md::list_children(store_, folder);
    if (locals.status().code() == ErrorCode::kNotFound) continue;
    if (!locals.is_ok()) return locals.status();
    for (const std::string& local : *locals) {
      auto topic = TopicName::of(domain, ns.tenant, ns.local, local);
      auto r = md::get(store_, folder + "/" + local);
      if (!topic.is_ok() || r.status().code() == ErrorCode::kNotFound) continue;
      if (!r.is_ok()) return r.status();
      auto policies = decode_policies(r->value);
      if (!policies.is_ok()) return policies.status();
      out.emplace(topic->to_string(), std::move(*policies));
    }
  }
  return Status::ok();
}

Status Tenancy::apply_configuration(const std::string& tenant, const TenantConfiguration& config) {
  MAGNETAR_RETURN_IF_ERROR(validate_entity_name(tenant, "tenant"));
  const std::string& home = config.info.home_cluster;
  if (home.empty()) return Status::invalid_argument("a tenant's configuration comes from its home cluster: none named");
  if (home == local_cluster()) {
    return Status::failed_precondition("cluster '" + local_cluster() + "' is the home of tenant '" + tenant +
                                       "' itself: it does not take its configuration from elsewhere");
  }
  if (auto here = md::get(store_, tenant_key(tenant)); here.is_ok()) {
    auto t = decode_tenant(here->value);
    if (t.is_ok() && t->home_cluster == local_cluster()) {
      return Status::failed_precondition("tenant '" + tenant + "' has its home here, on '" + local_cluster() +
                                         "'; cluster '" + home + "' claims it too");
    }
  }
  ApplyingHomeConfiguration applying;
  Status st = create_tenant(tenant, config.info);
  if (st.code() == ErrorCode::kAlreadyExists) st = update_tenant(tenant, config.info);
  MAGNETAR_RETURN_IF_ERROR(st);
  MAGNETAR_RETURN_IF_ERROR(config.limits ? set_tenant_limits(tenant, *config.limits) : remove_tenant_limits(tenant));
  for (const auto& [full, policies] : config.namespaces) {
    auto ns = NamespaceName::parse(full);
    if (!ns.is_ok() || ns->tenant != tenant) {
      return Status::invalid_argument("'" + full + "' is not a namespace of " + tenant);
    }
    st = create_namespace(*ns, policies);
    if (st.code() == ErrorCode::kAlreadyExists) {
      st = update_policies(*ns, [&policies](NamespacePolicies& p) {
        p = policies;
        return Status::ok();
      });
    }
    MAGNETAR_RETURN_IF_ERROR(st);
  }
  // Partitioned topics are created and grown here, never deleted (a Kafka
  // client may have made one here); one that cannot be is tried next time.
  for (const auto& [name, partitions] : config.partitioned_topics) {
    auto topic = TopicName::parse(name);
    if (!topic.is_ok() || topic->ns.tenant != tenant) continue;
    auto have = get_partitions(*topic);
    Status made = have.status();
    if (have.is_ok() && *have == 0) made = create_partitioned_topic(*topic, partitions);
    if (have.is_ok() && *have > 0 && *have < partitions) made = update_partitions(*topic, partitions);
    if (!made.is_ok()) {
      MLOG_DEBUG("configuration sync: partitioned topic {} ({} partitions at home '{}'): {}", name, partitions, home,
                 made.to_string());
    }
  }
  // Topic overrides as at home: written whether the topic exists here yet
  // or not (a replicated topic is made by its first message).
  for (const auto& [name, policies] : config.topic_policies) {
    auto topic = TopicName::parse(name);
    if (!topic.is_ok() || topic->ns.tenant != tenant || config.namespaces.count(topic->ns.to_string()) == 0) {
      return Status::invalid_argument("'" + name + "' is not a topic of " + tenant + "'s namespaces");
    }
    const std::string bytes = encode_policies(policies);
    auto current = md::get(store_, topic_policies_key(*topic));
    if (current.is_ok() && current->value == bytes) continue;
    MAGNETAR_RETURN_IF_ERROR(md::put(store_, topic_policies_key(*topic), bytes).status());
  }
  auto here = list_namespaces(tenant);
  if (!here.is_ok()) return here.status();
  for (const std::string& full : *here) {
    auto ns = NamespaceName::parse(full);
    if (!ns.is_ok()) continue;
    if (config.namespaces.count(full) != 0) {
      // Overrides removed at home go here too.
      std::map<std::string, NamespacePolicies> overrides;
      MAGNETAR_RETURN_IF_ERROR(stored_topic_policies(*ns, overrides));
      for (const auto& [name, unused] : overrides) {
        if (config.topic_policies.count(name) != 0) continue;
        if (auto topic = TopicName::parse(name); topic.is_ok()) MAGNETAR_RETURN_IF_ERROR(delete_topic_policies(*topic));
      }
      continue;
    }
    // One that still holds topics stays until they are deleted here.
    if (Status gone = delete_namespace(*ns); !gone.is_ok() && gone.code() != ErrorCode::kNotFound) {
      MLOG_DEBUG("configuration sync: namespace {} is gone at home '{}' but stays here: {}", full, home,
                 gone.to_string());
    }
  }
  return Status::ok();
}

Status Tenancy::remove_configuration(const std::string& tenant, const std::string& home) {
  auto here = get_tenant(tenant);
  if (!here.is_ok()) return here.status().code() == ErrorCode::kNotFound ? Status::ok() : here.status();
  if (here->home_cluster != home) {
    return Status::failed_precondition("tenant '" + tenant + "' has its home on '" + here->home_cluster +
                                       "' here, not on '" + home + "'");
  }
  ApplyingHomeConfiguration applying;
  auto namespaces = list_namespaces(tenant);
  if (!namespaces.is_ok()) return namespaces.status();
  for (const std::string& full : *namespaces) {
    auto ns = NamespaceName::parse(full);
    if (!ns.is_ok()) continue;
    MAGNETAR_RETURN_IF_ERROR(delete_namespace(*ns));
  }
  return delete_tenant(tenant);
}

// ---- partitioned topics ----

Status Tenancy::create_partitioned_topic(const TopicName& topic, int32_t partitions) {
  if (partitions < 1 || partitions > kMaxPartitions) {
    return Status::invalid_argument("the number of partitions must be between 1 and " +
                                    std::to_string(kMaxPartitions));
  }
  if (topic.is_partition()) {
    return Status::invalid_argument("'" + topic.local + "' names a partition; a partitioned topic's name must not "
                                    "end in -partition-<n>");
  }
  MAGNETAR_RETURN_IF_ERROR(require_namespace(topic.ns));
  auto ledger = md::get(store_, managed_ledger_key(topic));
  if (ledger.is_ok()) return Status::already_exists("topic '" + topic.to_string() + "' exists as a non-partitioned topic");
  auto existing = md::get(store_, partitioned_topic_key(topic));
  if (existing.is_ok()) return Status::already_exists("partitioned topic '" + topic.to_string() + "' already exists");
  MAGNETAR_RETURN_IF_ERROR(admit_topics(topic, partitions, false));
  auto r = md::put(store_, partitioned_topic_key(topic), encode_partitions(partitions), {metadata::kMustNotExist});
  return r.is_ok() ? Status::ok() : named(r.status(), quoted("partitioned topic", topic.to_string()));
}

Result<int32_t> Tenancy::get_partitions(const TopicName& topic) {
  MAGNETAR_RETURN_IF_ERROR(require_namespace(topic.ns));
  auto r = md::get(store_, partitioned_topic_key(topic));
  if (r.status().code() == ErrorCode::kNotFound || topic.is_partition()) return 0;
  if (!r.is_ok()) return r.status();
  return decode_partitions(r->value);
}

Status Tenancy::update_partitions(const TopicName& topic, int32_t partitions) {
  MAGNETAR_RETURN_IF_ERROR(require_namespace(topic.ns));
  auto current = md::get(store_, partitioned_topic_key(topic));
  if (!current.is_ok()) return named(current.status(), quoted("partitioned topic", topic.to_string()));
  auto n = decode_partitions(current->value);
  if (!n.is_ok()) return n.status();
  if (partitions <= *n || partitions > kMaxPartitions) {
    return Status::invalid_argument("the number of partitions can only grow: it is " + std::to_string(*n) +
                                    ", asked for " + std::to_string(partitions) + " (at most " +
                                    std::to_string(kMaxPartitions) + ")");
  }
  MAGNETAR_RETURN_IF_ERROR(admit_topics(topic, partitions - *n, false));
  auto r = md::put(store_, partitioned_topic_key(topic), encode_partitions(partitions), {current->stat.version});
  return r.is_ok() ? Status::ok() : named(r.status(), quoted("partitioned topic", topic.to_string()));
}

Status Tenancy::delete_partitioned_topic(const TopicName& topic) {
  MAGNETAR_RETURN_IF_ERROR(require_namespace(topic.ns));
  auto current = md::get(store_, partitioned_topic_key(topic));
  if (!current.is_ok()) return named(current.status(), quoted("partitioned topic", topic.to_string()));
  auto n = decode_partitions(current->value);
  MAGNETAR_RETURN_IF_ERROR(
      named(md::del(store_, partitioned_topic_key(topic), current->stat.version), quoted("partitioned topic", topic.to_string())));
  // Overrides go with the topic; one left behind would return with a
  // re-created topic of the same name.
  std::vector<std::string> keys{topic_policies_key(topic)};
  for (int32_t i = 0; n.is_ok() && i < *n; ++i) keys.push_back(topic_policies_key(topic.partition_of(i)));
  for (const auto& key : keys) {
    Status st = md::del(store_, key);
    if (!st.is_ok() && st.code() != ErrorCode::kNotFound) {
      MLOG_WARN("partitioned topic {} deleted, but not its policy overrides at {}: {}", topic.to_string(), key,
                st.to_string());
    }
  }
  return Status::ok();
}

Result<std::vector<std::string>> Tenancy::list_partitioned_topics(const NamespaceName& ns, TopicDomain domain) {
  MAGNETAR_RETURN_IF_ERROR(require_namespace(ns));
  std::string prefix = std::string(domain_name(domain)) + "://" + ns.to_string() + "/";
  auto children =
      md::list_children(store_, "/admin/partitioned-topics/" + ns.to_string() + "/" + std::string(domain_name(domain)));
  if (!children.is_ok()) return children.status();
  std::vector<std::string> out;
  for (const auto& c : *children) out.push_back(prefix + c);
  return out;
}

Result<std::vector<std::string>> Tenancy::list_topics(const NamespaceName& ns, TopicDomain domain) {
  auto partitioned = list_partitioned_topics(ns, domain);
  if (!partitioned.is_ok()) return partitioned.status();
  std::set<std::string> topics;
  for (const auto& name : *partitioned) {
    auto t = TopicName::parse(name);
    if (!t.is_ok()) continue;
    auto n = get_partitions(*t);
    if (!n.is_ok()) return n.status();
    for (int32_t i = 0; i < *n; ++i) topics.insert(t->partition_of(i).to_string());
  }
  auto ledgers =
      md::list_children(store_, "/managed-ledgers/" + ns.to_string() + "/" + std::string(domain_name(domain)));
  if (!ledgers.is_ok()) return ledgers.status();
  for (const auto& l : *ledgers) {
    if (l == kTraceTopicLocal) continue;  // the namespace's traces, kept by the broker
    topics.insert(std::string(domain_name(domain)) + "://" + ns.to_string() + "/" + l);
  }
  return std::vector<std::string>(topics.begin(), topics.end());
}

Result<std::vector<TopicName>> Tenancy::topics_with_subscription(const NamespaceName& ns,
                                                                 const std::string& subscription) {
  auto ledgers = md::list_children(
      store_, "/managed-ledgers/" + ns.to_string() + "/" + std::string(domain_name(TopicDomain::kPersistent)));
  if (!ledgers.is_ok()) return ledgers.status();
  std::vector<TopicName> out;
  for (const auto& l : *ledgers) {
    auto name = TopicName::of(TopicDomain::kPersistent, ns.tenant, ns.local, l);
    if (!name.is_ok() || is_trace_topic(*name)) continue;
    auto cursor = md::get(store_, managed_ledger_key(*name) + "/cursors/" + subscription);
    if (!cursor.is_ok()) {
      if (cursor.status().code() == ErrorCode::kNotFound) continue;
      return cursor.status();
    }
    out.push_back(std::move(name).value());
  }
  return out;
}

Result<std::vector<std::string>> Tenancy::known_topics(const NamespaceName& ns, TopicDomain domain) {
  auto stored = list_topics(ns, domain);
  if (!stored.is_ok()) return stored.status();
  std::set<std::string> all(stored->begin(), stored->end());
  if (loaded_topics_) {
    for (auto& loaded : loaded_topics_()) {
      auto name = TopicName::parse(loaded);
      if (name.is_ok() && name->ns == ns && name->domain == domain && !is_trace_topic(*name)) all.insert(loaded);
    }
  }
  return std::vector<std::string>(all.begin(), all.end());
}

Result<size_t> Tenancy::count_topics(const NamespaceName& ns, const std::vector<std::string>& loaded,
                                     const TopicName& asking) {
  std::set<std::string> all;
  for (TopicDomain d : {TopicDomain::kPersistent, TopicDomain::kNonPersistent}) {
    auto stored = list_topics(ns, d);
    if (!stored.is_ok()) return stored.status();
    all.insert(stored->begin(), stored->end());
  }
  for (const auto& l : loaded) {
    auto name = TopicName::parse(l);
    if (name.is_ok() && name->ns == ns && !is_trace_topic(*name)) all.insert(l);
  }
  if (auto it = admitted_.find(ns.to_string()); it != admitted_.end()) {
    // Stored or loaded by now: counted as such from here (and no longer
    // once deleted).
    std::erase_if(it->second, [&all](const auto& a) { return all.count(a.first) > 0; });
    for (const auto& [topic, when] : it->second) all.insert(topic);
  }
  // Asked again (the admin API asks, then the broker as it creates): the
  // topic is not one of those already there.
  all.erase(asking.to_string());
  return all.size();
}

Result<size_t> Tenancy::count_tenant_topics(const std::string& tenant, const std::vector<std::string>& loaded,
                                            const TopicName& asking) {
  auto namespaces = list_namespaces(tenant);
  if (!namespaces.is_ok()) return namespaces.status();
  size_t total = 0;
  for (const auto& full : *namespaces) {
    auto ns = NamespaceName::parse(full);
    if (!ns.is_ok()) continue;
    auto n = count_topics(*ns, loaded, asking);
    if (!n.is_ok()) return n.status();
    total += *n;
  }
  return total;
}

Result<size_t> Tenancy::count_tenant_topics(const std::string& tenant) {
  std::vector<std::string> loaded = loaded_topics_ ? loaded_topics_() : std::vector<std::string>{};
  return count_tenant_topics(tenant, loaded, TopicName{});
}

Status Tenancy::admit_topics(const TopicName& topic, int32_t new_topics, bool remember) {
  auto policies = get_policies(topic.ns);
  if (!policies.is_ok()) return policies.status();
  auto limits = get_tenant_limits(topic.ns.tenant);
  if (!limits.is_ok()) return limits.status();
  const int32_t ns_max = policies->max_topics_per_namespace.value_or(0);
  const int32_t tenant_max = limits->max_topics;
  // A topic is stored (or loaded) within moments of its admission, or
  // failed to be: older admissions count no longer.
  const auto now = std::chrono::steady_clock::now();
  for (auto it = admitted_.begin(); it != admitted_.end();) {
    std::erase_if(it->second, [now](const auto& a) { return now - a.second > std::chrono::seconds(10); });
    it = it->second.empty() ? admitted_.erase(it) : std::next(it);
  }
  if (ns_max <= 0 && tenant_max <= 0) return Status::ok();
  std::vector<std::string> loaded = loaded_topics_ ? loaded_topics_() : std::vector<std::string>{};
  if (ns_max > 0) {
    auto n = count_topics(topic.ns, loaded, topic);
    if (!n.is_ok()) return n.status();
    if (*n + new_topics > static_cast<size_t>(ns_max)) {
      return Status::failed_precondition("Exceed maximum number of topics in namespace " + topic.ns.to_string() +
                                         " (" + std::to_string(ns_max) + ")");
    }
  }
  if (tenant_max > 0) {
    auto total = count_tenant_topics(topic.ns.tenant, loaded, topic);
    if (!total.is_ok()) return total.status();
    if (*total + new_topics > static_cast<size_t>(tenant_max)) {
      return Status::failed_precondition("Tenant " + topic.ns.tenant + " reached max topics limit (" +
                                         std::to_string(tenant_max) + ")");
    }
  }
  // A partitioned topic is stored as soon as it is admitted; a topic may
  // take a moment (its first write), and meanwhile counts from here.
  if (remember) admitted_[topic.ns.to_string()][topic.to_string()] = now;
  return Status::ok();
}

Result<std::vector<StoredTopic>> stored_topics_of_tenant(metadata::Store& store, const std::string& tenant) {
  std::vector<StoredTopic> out;
  auto namespaces = md::list_children(store, "/admin/policies/" + tenant);
  if (!namespaces.is_ok()) return namespaces.status();
  for (const auto& ns : *namespaces) {
    const std::string base = "/managed-ledgers/" + tenant + "/" + ns + "/persistent";
    auto topics = md::list_children(store, base);
    if (!topics.is_ok()) return topics.status();
    for (const auto& local : *topics) {
      auto name = TopicName::parse("persistent://" + tenant + "/" + ns + "/" + local);
      if (name.is_ok()) out.push_back(StoredTopic{std::move(name).value(), base + "/" + local});
    }
  }
  return out;
}

Result<std::set<std::string>> Tenancy::stored_subscriptions(const std::string& tenant) {
  auto topics = stored_topics_of_tenant(store_, tenant);
  if (!topics.is_ok()) return topics.status();
  std::set<std::string> all;
  for (const auto& t : *topics) {
    auto cursors = md::list_children(store_, t.key + "/cursors");
    if (!cursors.is_ok()) continue;  // deleted meanwhile
    for (const auto& c : *cursors) all.insert(t.name.to_string() + "/" + c);
  }
  return all;
}

Status Tenancy::admit_subscription(const TopicName& topic, const std::string& subscription) {
  auto limits = get_tenant_limits(topic.ns.tenant);
  if (!limits.is_ok()) return limits.status();
  const int32_t max = limits->max_subscriptions;
  if (max <= 0) return Status::ok();
  const std::string& tenant = topic.ns.tenant;
  const std::string asking = topic.to_string() + "/" + subscription;
  const auto now = std::chrono::steady_clock::now();
  auto& recent = admitted_subscriptions_[tenant];
  std::erase_if(recent, [now](const auto& a) { return now - a.second > std::chrono::seconds(10); });
  auto stored = stored_subscriptions(tenant);
  if (!stored.is_ok()) return stored.status();
  std::set<std::string> all = std::move(stored).value();
  // Stored by now: counted as such from here (and no longer once deleted).
  std::erase_if(recent, [&all](const auto& a) { return all.count(a.first) > 0; });
  for (const auto& [name, when] : recent) all.insert(name);
  all.erase(asking);
  if (all.size() + 1 > static_cast<size_t>(max)) {
    return Status::failed_precondition("Tenant " + tenant + " reached max subscriptions limit (" +
                                       std::to_string(max) + ")");
  }
  recent[asking] = now;
  return Status::ok();
}

// ---- topic-level policies ----

Status Tenancy::require_topic(const TopicName& topic) {
  MAGNETAR_RETURN_IF_ERROR(require_namespace(topic.ns));
  auto n = get_partitions(topic.base());
  if (!n.is_ok()) return n.status();
  if (topic.is_partition() ? topic.partition < *n : *n > 0) return Status::ok();
  auto ledger = md::get(store_, managed_ledger_key(topic));
  if (ledger.is_ok()) return Status::ok();
  if (ledger.status().code() != ErrorCode::kNotFound) return ledger.status();
  return Status::not_found("topic '" + topic.to_string() + "' does not exist");
}

Result<TopicOrigin> Tenancy::topic_origin(const TopicName& topic) {
  auto n = get_partitions(topic.base());
  if (!n.is_ok()) return n.status();
  const TopicName log_of = !topic.is_partition() && *n > 0 ? topic.partition_of(0) : topic;
  auto record = md::get(store_, managed_ledger_key(log_of));
  if (!record.is_ok()) {
    if (record.status().code() == ErrorCode::kNotFound) return TopicOrigin::kPulsar;
    return record.status();
  }
  auto origin = ledger::ManagedLedger::stored_origin(record->value);
  if (!origin.is_ok()) return origin.status();
  return origin_from_byte(*origin);
}

Result<RetentionInEffect> Tenancy::retention_of(const TopicName& topic) {
  auto own = get_topic_policies(topic);
  if (!own.is_ok()) return own.status();
  auto ns = get_policies(topic.ns);
  if (!ns.is_ok()) return ns.status();
  auto origin = topic_origin(topic);
  if (!origin.is_ok()) return origin.status();
  NamespacePolicies effective = *ns;
  const bool from_topic = own->retention.has_value();
  if (from_topic) effective.retention = own->retention;
  return retention_in_effect(topic, effective, from_topic, *origin, defaults_.retention);
}

Status Tenancy::delete_topic_policies(const TopicName& topic) {
  if (auto it = admitted_.find(topic.ns.to_string()); it != admitted_.end()) it->second.erase(topic.to_string());
  Status st = md::del(store_, topic_policies_key(topic));
  return st.code() == ErrorCode::kNotFound ? Status::ok() : st;
}

Result<NamespacePolicies> Tenancy::get_topic_policies(const TopicName& topic) {
  MAGNETAR_RETURN_IF_ERROR(require_topic(topic));
  auto r = md::get(store_, topic_policies_key(topic));
  if (r.status().code() == ErrorCode::kNotFound) return NamespacePolicies{};
  if (!r.is_ok()) return r.status();
  return decode_policies(r->value);
}

Status Tenancy::update_topic_policies(const TopicName& topic, const std::function<Status(NamespacePolicies&)>& change) {
  MAGNETAR_RETURN_IF_ERROR(check_home(topic.ns.tenant));
  MAGNETAR_RETURN_IF_ERROR(require_topic(topic));
  for (int attempt = 0; attempt < kMaxCasAttempts; ++attempt) {
    auto current = md::get(store_, topic_policies_key(topic));
    if (!current.is_ok() && current.status().code() != ErrorCode::kNotFound) return current.status();
    NamespacePolicies policies;
    int64_t expected = metadata::kMustNotExist;
    if (current.is_ok()) {
      auto decoded = decode_policies(current->value);
      if (!decoded.is_ok()) return decoded.status();
      policies = std::move(decoded).value();
      expected = current->stat.version;
    }
    MAGNETAR_RETURN_IF_ERROR(change(policies));
    MAGNETAR_RETURN_IF_ERROR(validate(policies));
    auto r = md::put(store_, topic_policies_key(topic), encode_policies(policies), {expected});
    if (r.is_ok()) return Status::ok();
    auto code = r.status().code();
    if (code != ErrorCode::kFailedPrecondition && code != ErrorCode::kAlreadyExists) return r.status();
    backoff(attempt);
  }
  return Status::unavailable("the policies of topic '" + topic.to_string() + "' changed " +
                             std::to_string(kMaxCasAttempts) + " times while updating them; try again");
}

}  // namespace magnetar::broker
