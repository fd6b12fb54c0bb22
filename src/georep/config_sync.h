// ConfigSync: a tenant's configuration goes from its home cluster to the
// other clusters it allows. Pulsar keeps one configuration store for every
// cluster; each Magnetar cluster keeps its own, and a tenant's home
// (TenantInfo::home_cluster, the cluster it was created on) sends it to the
// others, which refuse edits of their own (Tenancy::check_home), so that
// two sites never diverge.
//
// Every `interval`, on its own thread: for each tenant whose home is this
// cluster, its configuration (Tenancy::configuration_of: the tenant, its
// limits, its namespaces and their policies, its topics' overrides and its
// partitioned topics' partition counts) goes to every other cluster
// of its allowedClusters that has a record with a service URL:
// PUT <serviceUrl>/admin/v2/internal/configuration/tenants/<tenant>, with
// the token the record gives replicators (over https:// to serviceUrlTls
// when the record says brokerClientTlsEnabled), when it changed since the
// last send that cluster took, or a minute went by. A tenant sent before
// and gone here is deleted there (DELETE ...?home=<this cluster>). A send
// that fails is tried again next round; each cluster's error is logged
// when it changes. With `leads` set, only the member it names sends (the
// metadata leader of a cluster of several members). Which tenants went to
// which clusters is kept in the metadata store (kSentKey), so that a home
// that restarts, or another member that becomes the sender, still deletes
// there what was deleted here meanwhile.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "broker/tenancy.h"
#include "common/status.h"
#include "metadata/store.h"

namespace magnetar::georep {

class ConfigSync {
 public:
  static constexpr std::string_view kSentKey = "/georep/configuration-sync/sent";

  ConfigSync(broker::Tenancy& tenancy, metadata::Store& store, std::chrono::milliseconds interval);
  ~ConfigSync();
  ConfigSync(const ConfigSync&) = delete;
  ConfigSync& operator=(const ConfigSync&) = delete;

  // Before start(): whether this member sends (unset: always).
  void set_leads(std::function<bool()> leads) { leads_ = std::move(leads); }
  void start();
  void stop();

 private:
  using Target = std::pair<std::string, std::string>;  // tenant, cluster
  void run();
  void round();
  common::Status send(const std::string& tenant, const std::string& cluster, const std::string& method,
                      const std::string& body);
  void note(const Target& target, const common::Status& st);
  // The targets sent to, as the store holds them (once), and written back when they changed.
  void load_sent();
  void save_sent();

  broker::Tenancy& tenancy_;
  metadata::Store& store_;
  const std::chrono::milliseconds interval_;
  std::function<bool()> leads_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  // Sync thread only.
  struct Sent {
    std::string configuration;
    int64_t at_ms = 0;
  };
  std::map<Target, Sent> sent_;
  bool loaded_ = false;
  std::set<Target> saved_;  // the targets kSentKey holds
  std::map<Target, std::string> errors_;  // the last error logged per target
};

}  // namespace magnetar::georep
