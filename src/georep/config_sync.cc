#include "georep/config_sync.h"

#include "client/http_client.h"
#include "common/base64.h"
#include "common/clock.h"
#include "common/logging.h"
#include "georep/remote_admin.h"
#include "metadata/blocking.h"

namespace magnetar::georep {

using common::Status;

namespace {
// A configuration the remote already took is sent again this often anyway
// (a remote restored from a backup, an edit made there before its home
// was set).
constexpr int64_t kResendMs = 60000;
}  // namespace

ConfigSync::ConfigSync(broker::Tenancy& tenancy, metadata::Store& store, std::chrono::milliseconds interval)
    : tenancy_(tenancy), store_(store), interval_(interval) {}

void ConfigSync::load_sent() {
  auto r = metadata::blocking::get(store_, std::string(kSentKey));
  if (!r.is_ok()) {
    loaded_ = r.status().code() == common::ErrorCode::kNotFound;
    return;
  }
  // "tenant\tcluster\n" lines.
  std::string_view rest = r->value;
  while (!rest.empty()) {
    const auto end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    const auto tab = line.find('\t');
    if (tab == std::string_view::npos) continue;
    Target target{std::string(line.substr(0, tab)), std::string(line.substr(tab + 1))};
    saved_.insert(target);
    sent_.try_emplace(target);  // sent again when it is still here, deleted there when not
  }
  loaded_ = true;
}

void ConfigSync::save_sent() {
  std::set<Target> now;
  for (const auto& [target, unused] : sent_) now.insert(target);
  if (now == saved_) return;
  std::string value;
  for (const auto& [tenant, cluster] : now) value += tenant + "\t" + cluster + "\n";
  if (metadata::blocking::put(store_, std::string(kSentKey), value).is_ok()) saved_ = std::move(now);
}

ConfigSync::~ConfigSync() { stop(); }

void ConfigSync::start() {
  if (thread_.joinable() || interval_.count() <= 0) return;
  thread_ = std::thread([this]() { run(); });
}

void ConfigSync::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ConfigSync::run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    round();
    lock.lock();
    wake_.wait_for(lock, interval_, [this]() { return stopping_; });
  }
}

void ConfigSync::round() {
  if (leads_ && !leads_()) {
    loaded_ = false;  // another member sends: read what it sent when this one leads again
    sent_.clear();
    saved_.clear();
    return;
  }
  if (!loaded_) load_sent();
  if (!loaded_) return;  // the store cannot tell yet: deleting nothing, sending nothing
  auto tenants = tenancy_.list_tenants();
  if (!tenants.is_ok()) return;
  const std::string& local = tenancy_.local_cluster();
  std::set<Target> present;
  for (const std::string& tenant : *tenants) {
    // Most tenants are homed nowhere or elsewhere: one read tells.
    auto info = tenancy_.get_tenant(tenant);
    if (!info.is_ok() || info->home_cluster != local) continue;
    auto config = tenancy_.configuration_of(tenant);
    if (!config.is_ok() || config->info.home_cluster != local) continue;
    const std::string bytes = broker::encode_configuration(*config);
    for (const std::string& cluster : config->info.allowed_clusters) {
      if (cluster == local) continue;
      const Target target{tenant, cluster};
      present.insert(target);
      const int64_t now = common::monotonic_ms();
      auto sent = sent_.find(target);
      if (sent != sent_.end() && sent->second.configuration == bytes && now - sent->second.at_ms < kResendMs) continue;
      Status st = send(tenant, cluster, "PUT", "{\"configuration\":\"" + common::base64_encode(bytes) + "\"}");
      note(target, st);
      if (st.is_ok()) sent_[target] = Sent{bytes, now};
    }
  }
  // Deleted here, or no longer allowing that cluster: deleted there.
  for (auto it = sent_.begin(); it != sent_.end();) {
    if (present.count(it->first) != 0) {
      ++it;
      continue;
    }
    Status st = send(it->first.first, it->first.second, "DELETE", "");
    note(it->first, st);
    it = st.is_ok() || st.code() == common::ErrorCode::kNotFound ? sent_.erase(it) : std::next(it);
  }
  save_sent();
}

Status ConfigSync::send(const std::string& tenant, const std::string& cluster, const std::string& method,
                        const std::string& body) {
  std::string path = "/admin/v2/internal/configuration/tenants/" + client::escape_segment(tenant);
  if (method == "DELETE") path += "?home=" + client::escape_segment(tenancy_.local_cluster());
  return call_remote_admin(tenancy_, cluster, method, path, body, std::chrono::seconds(10));
}

void ConfigSync::note(const Target& target, const Status& st) {
  auto last = errors_.find(target);
  if (st.is_ok()) {
    if (last != errors_.end()) {
      MLOG_INFO("configuration sync: tenant {} reaches cluster {} again", target.first, target.second);
      errors_.erase(last);
    }
    return;
  }
  const std::string why = st.to_string();
  if (last != errors_.end() && last->second == why) return;
  MLOG_WARN("configuration sync: tenant {} cannot be sent to cluster {}: {}", target.first, target.second, why);
  errors_[target] = why;
}

}  // namespace magnetar::georep
