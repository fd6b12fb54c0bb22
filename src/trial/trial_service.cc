#include "trial/trial_service.h"

#include <openssl/rand.h>

#include <algorithm>
#include <optional>
#include <random>
#include <set>

#include "broker/broker_service.h"
#include "broker/policy_cache.h"
#include "broker/tenancy.h"
#include "broker/topic_lifecycle.h"
#include "common/clock.h"
#include "common/logging.h"
#include "metadata/blocking.h"

namespace magnetar::trial {

using common::ErrorCode;
using common::Result;
using common::Status;
namespace md = metadata::blocking;

namespace {

constexpr std::string_view kTrialsRoot = "/trials";
// How long the trial thread waits for one step on the tenancy thread (a
// topic's deletion included) before it gives up on this pass.
constexpr auto kStepTimeout = std::chrono::seconds(60);
// The longest the sweeper sleeps without looking at the clock again.
constexpr int64_t kMaxSweepSleepMs = 60'000;

// A fresh tenant name: the prefix and 12 random base-32 characters (60 bits).
std::string random_tenant_name() {
  static constexpr char kAlphabet[] = "abcdefghijkmnpqrstuvwxyz23456789";
  unsigned char bytes[12];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    for (auto& b : bytes) b = static_cast<unsigned char>(std::random_device{}());
  }
  std::string name(TrialService::kTenantPrefix);
  for (unsigned char b : bytes) name += kAlphabet[b % 32];
  return name;
}

bool tolerable(const Status& st) { return st.is_ok() || st.code() == ErrorCode::kNotFound; }

// One result handed from another thread to the trial thread.
struct Handoff {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Status> result;
  void set(Status st) {
    std::lock_guard lock(mu);
    result = std::move(st);
    cv.notify_all();
  }
  Status wait(std::string_view what) {
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, kStepTimeout, [this]() { return result.has_value(); })) {
      return Status::timeout(std::string(what) + " did not finish in time");
    }
    return *result;
  }
};

// Deletes `key` and every key below it (children first).
Status delete_subtree(metadata::Store& store, const std::string& key) {
  auto children = md::list_children(store, key);
  if (children.is_ok()) {
    for (const auto& c : *children) MAGNETAR_RETURN_IF_ERROR(delete_subtree(store, key + "/" + c));
  } else if (children.status().code() != ErrorCode::kNotFound) {
    return children.status();
  }
  Status st = md::del(store, key);
  return tolerable(st) ? Status::ok() : st;
}

}  // namespace

std::string trial_key(std::string_view tenant) { return std::string(kTrialsRoot) + "/" + std::string(tenant); }

nlohmann::json TrialRecord::to_json() const {
  return {{"tenant", tenant},
          {"namespace", ns},
          {"role", role},
          {"address", address},
          {"createdAt", common::iso8601_utc(created_ms)},
          {"createdAtMs", created_ms},
          {"expiresAt", common::iso8601_utc(expires_ms)},
          {"expiresAtMs", expires_ms}};
}

Result<TrialRecord> TrialRecord::from_json(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("tenant") || !j["tenant"].is_string() ||
      !j.contains("expiresAtMs") || !j["expiresAtMs"].is_number_integer()) {
    return Status::corruption("a trial record is not what this version writes");
  }
  TrialRecord r;
  r.tenant = j["tenant"].get<std::string>();
  r.ns = j.value("namespace", "");
  r.role = j.value("role", "");
  r.address = j.value("address", "");
  r.created_ms = j.value("createdAtMs", int64_t{0});
  r.expires_ms = j["expiresAtMs"].get<int64_t>();
  return r;
}

TrialService::TrialService(broker::Tenancy& tenancy, broker::BrokerService& broker, metadata::Store& store,
                           const broker::PolicyCache& policies, security::TokenKey signing_key, TrialOptions options)
    : tenancy_(tenancy),
      broker_(broker),
      store_(store),
      policies_(policies),
      signing_key_(std::move(signing_key)),
      options_(std::move(options)),
      limiter_(options_.signups) {}

TrialService::~TrialService() { stop(); }

Status TrialService::start() {
  auto records = read_records();
  if (!records.is_ok()) return records.status();
  for (const auto& r : *records) expiries_[r.tenant] = r.expires_ms;
  MLOG_INFO("trial mode: {} trial tenant(s), each expiring {} s after sign-up", expiries_.size(),
            options_.expiry.count());
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this]() { run(); });
  return Status::ok();
}

void TrialService::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Tasks never run are dropped; a REST caller's responder answers 500 then.
  std::lock_guard lock(mu_);
  tasks_.clear();
}

Status TrialService::post(runtime::Task task) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return Status::unavailable("the trial service is stopping");
    if (tasks_.size() >= kMaxQueuedTasks) return Status::resource_exhausted("too many trial requests at once");
    tasks_.push_back(std::move(task));
  }
  cv_.notify_all();
  return Status::ok();
}

void TrialService::run() {
  pthread_setname_np(pthread_self(), "trial");
  for (;;) {
    runtime::Task task;
    {
      std::unique_lock lock(mu_);
      int64_t sleep_ms = kMaxSweepSleepMs;
      if (!expiries_.empty()) {
        int64_t next = INT64_MAX;
        for (const auto& [tenant, at] : expiries_) next = std::min(next, at);
        sleep_ms = std::clamp<int64_t>(next - common::wall_clock_ms(), 0, kMaxSweepSleepMs);
      }
      cv_.wait_for(lock, std::chrono::milliseconds(sleep_ms), [this]() { return stopping_ || !tasks_.empty(); });
      if (stopping_) return;
      if (!tasks_.empty()) {
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
    }
    if (task) {
      task();
    } else {
      sweep_due();
    }
  }
}

void TrialService::sweep_due() {
  const int64_t now = common::wall_clock_ms();
  std::vector<std::string> due;
  for (const auto& [tenant, at] : expiries_) {
    if (at <= now) due.push_back(tenant);
  }
  for (const auto& tenant : due) {
    Status st = delete_trial(tenant);
    if (st.is_ok()) {
      MLOG_INFO("trial {} expired: its tenant and all its data are deleted", tenant);
    } else {
      // Tried again on the next pass, in a minute at most.
      MLOG_WARN("trial {} expired, but deleting it failed (tried again later): {}", tenant, st.to_string());
      expiries_[tenant] = now + kMaxSweepSleepMs / 4;
    }
  }
}

Result<std::vector<TrialRecord>> TrialService::read_records() {
  std::vector<TrialRecord> out;
  auto names = md::list_children(store_, std::string(kTrialsRoot));
  if (!names.is_ok()) {
    if (names.status().code() == ErrorCode::kNotFound) return out;
    return names.status();
  }
  for (const auto& name : *names) {
    auto value = md::get(store_, trial_key(name));
    if (!value.is_ok()) {
      if (value.status().code() == ErrorCode::kNotFound) continue;
      return value.status();
    }
    auto record = TrialRecord::from_json(value->value);
    if (!record.is_ok()) {
      MLOG_WARN("trial record {} is unreadable, skipped: {}", name, record.status().message());
      continue;
    }
    out.push_back(std::move(*record));
  }
  return out;
}

Status TrialService::write_record(const TrialRecord& record, int64_t expected_version) {
  metadata::PutOptions put;
  put.expected_version = expected_version;
  auto r = md::put(store_, trial_key(record.tenant), record.to_json().dump(), put);
  return r.is_ok() ? Status::ok() : r.status();
}

Status TrialService::on_tenancy(std::function<Status()> fn) {
  auto handoff = std::make_shared<Handoff>();
  Status queued = tenancy_.submit([handoff, fn = std::move(fn)]() { handoff->set(fn()); });
  if (!queued.is_ok()) return queued;
  return handoff->wait("a tenancy step");
}

void TrialService::sign_up(SignupRequest request, int64_t* retry_after_secs,
                           std::function<void(Result<Signup>)> done) {
  // The rate first: guessing invite codes costs sign-ups too.
  int64_t wait = limiter_.try_take(request.address, common::monotonic_ms());
  if (wait > 0) {
    *retry_after_secs = wait;
    return done(Status::resource_exhausted("too many sign-ups; try again in " + std::to_string(wait) + " s"));
  }
  if (!options_.invite_codes.empty()) {
    bool known = false;
    for (const auto& code : options_.invite_codes) known = known || code == request.invite_code;
    if (!known) {
      return done(Status::permission_denied(request.invite_code.empty() ? "an invite code is required to sign up"
                                                                         : "this invite code is not valid"));
    }
  }
  auto shared_done = std::make_shared<std::function<void(Result<Signup>)>>(std::move(done));
  Status queued = post([this, request = std::move(request), shared_done]() { (*shared_done)(make_trial(request)); });
  if (!queued.is_ok()) (*shared_done)(queued);
}

Result<Signup> TrialService::make_trial(const SignupRequest& request) {
  if (expiries_.size() >= options_.max_trials) {
    return Status::unavailable("the trial is full (" + std::to_string(options_.max_trials) +
                               " trials are running); try again later");
  }
  TrialRecord record;
  record.tenant = random_tenant_name();
  record.ns = record.tenant + "/" + options_.namespace_name;
  record.role = record.tenant;
  record.address = request.address;
  record.created_ms = common::wall_clock_ms();
  record.expires_ms = record.created_ms + std::chrono::milliseconds(options_.expiry).count();
  // The record first: whatever is made after it, the sweeper deletes.
  MAGNETAR_RETURN_IF_ERROR(write_record(record, metadata::kMustNotExist));
  expiries_[record.tenant] = record.expires_ms;
  auto ns = broker::NamespaceName::parse(record.ns);
  if (!ns.is_ok()) return ns.status();
  Status made = on_tenancy([this, &record, &ns]() -> Status {
    broker::TenantInfo info;
    info.admin_roles = {record.role};
    info.allowed_clusters = {options_.cluster};
    MAGNETAR_RETURN_IF_ERROR(tenancy_.create_tenant(record.tenant, info));
    MAGNETAR_RETURN_IF_ERROR(tenancy_.set_tenant_limits(record.tenant, options_.limits));
    broker::NamespacePolicies policies;
    policies.replication_clusters = {options_.cluster};
    return tenancy_.create_namespace(*ns, policies);
  });
  if (!made.is_ok()) {
    MLOG_WARN("trial sign-up from {} failed: {}", request.address, made.to_string());
    Status undone = delete_trial(record.tenant);
    if (!undone.is_ok()) MLOG_WARN("trial {}: undoing a failed sign-up: {}", record.tenant, undone.to_string());
    return made;
  }
  security::JwtClaims claims;
  claims.subject = record.role;
  auto token = security::sign_token(signing_key_, claims);
  if (!token.is_ok()) return token.status();
  await_policies(record);
  MLOG_INFO("trial {} signed up from {}, expires {}", record.tenant, request.address,
            common::iso8601_utc(record.expires_ms));
  return Signup{std::move(record), std::move(*token)};
}

void TrialService::await_policies(const TrialRecord& record) {
  auto ns = broker::NamespaceName::parse(record.ns);
  if (!ns.is_ok()) return;
  const int64_t deadline = common::monotonic_ms() + 5000;
  while (common::monotonic_ms() < deadline) {
    auto tenant = policies_.tenant(record.tenant);
    if (tenant != nullptr && tenant->admin_roles.count(record.role) > 0 &&
        policies_.tenant_limits(record.tenant) != nullptr && policies_.namespace_policies(*ns) != nullptr) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  MLOG_WARN("trial {}: the policy cache did not see it within 5 s", record.tenant);
}

Status TrialService::delete_tenant_data(const std::string& tenant) {
  std::vector<std::string> namespaces;
  MAGNETAR_RETURN_IF_ERROR(on_tenancy([this, &tenant, &namespaces]() -> Status {
    auto list = tenancy_.list_namespaces(tenant);
    if (!list.is_ok()) return tolerable(list.status()) ? Status::ok() : list.status();
    namespaces = std::move(*list);
    return Status::ok();
  }));
  for (const auto& name : namespaces) {
    auto ns = broker::NamespaceName::parse(name);
    if (!ns.is_ok()) continue;
    // Partitioned topics first (their partitions with them), then the rest.
    std::vector<std::string> topics;
    MAGNETAR_RETURN_IF_ERROR(on_tenancy([this, &ns, &topics]() -> Status {
      std::set<std::string> rest;
      for (auto d : {broker::TopicDomain::kPersistent, broker::TopicDomain::kNonPersistent}) {
        auto partitioned = tenancy_.list_partitioned_topics(*ns, d);
        if (partitioned.is_ok()) topics.insert(topics.end(), partitioned->begin(), partitioned->end());
        auto stored = tenancy_.list_topics(*ns, d);
        if (stored.is_ok()) rest.insert(stored->begin(), stored->end());
        auto loaded = tenancy_.known_topics(*ns, d);
        if (loaded.is_ok()) rest.insert(loaded->begin(), loaded->end());
      }
      topics.insert(topics.end(), rest.begin(), rest.end());
      return Status::ok();
    }));
    for (const auto& name : topics) {
      auto topic = broker::TopicName::parse(name);
      if (!topic.is_ok()) continue;
      auto handoff = std::make_shared<Handoff>();
      Status queued = tenancy_.submit([this, handoff, t = *topic]() {
        broker::delete_topic_with_data(broker_, tenancy_, t, /*force=*/true, [handoff](Status st) { handoff->set(st); });
      });
      Status st = queued.is_ok() ? handoff->wait("deleting topic " + name) : queued;
      if (!tolerable(st)) return st;
    }
    MAGNETAR_RETURN_IF_ERROR(delete_subtree(store_, "/amqp/" + ns->tenant + "/" + ns->local));
    MAGNETAR_RETURN_IF_ERROR(on_tenancy([this, &ns]() -> Status {
      Status st = tenancy_.delete_namespace(*ns);
      return tolerable(st) ? Status::ok() : st;
    }));
  }
  MAGNETAR_RETURN_IF_ERROR(delete_subtree(store_, "/amqp/" + tenant));
  MAGNETAR_RETURN_IF_ERROR(delete_subtree(store_, "/schemas/" + tenant));
  return on_tenancy([this, &tenant]() -> Status {
    Status st = tenancy_.delete_tenant(tenant);
    return tolerable(st) ? Status::ok() : st;
  });
}

Status TrialService::delete_trial(const std::string& tenant) {
  MAGNETAR_RETURN_IF_ERROR(delete_tenant_data(tenant));
  Status st = md::del(store_, trial_key(tenant));
  if (!tolerable(st)) return st;
  expiries_.erase(tenant);
  return Status::ok();
}

void TrialService::list(std::function<void(Result<std::vector<TrialRecord>>)> done) {
  auto shared_done = std::make_shared<decltype(done)>(std::move(done));
  Status queued = post([this, shared_done]() { (*shared_done)(read_records()); });
  if (!queued.is_ok()) (*shared_done)(queued);
}

void TrialService::extend(std::string tenant, std::chrono::seconds by, std::function<void(Result<TrialRecord>)> done) {
  auto shared_done = std::make_shared<decltype(done)>(std::move(done));
  Status queued = post([this, tenant = std::move(tenant), by, shared_done]() {
    auto value = md::get(store_, trial_key(tenant));
    if (!value.is_ok()) {
      return (*shared_done)(value.status().code() == ErrorCode::kNotFound
                                ? Status::not_found("trial '" + tenant + "' does not exist")
                                : value.status());
    }
    auto record = TrialRecord::from_json(value->value);
    if (!record.is_ok()) return (*shared_done)(record.status());
    record->expires_ms = std::max(record->expires_ms, common::wall_clock_ms()) +
                         std::chrono::milliseconds(by).count();
    Status st = write_record(*record, value->stat.version);
    if (!st.is_ok()) return (*shared_done)(st);
    expiries_[tenant] = record->expires_ms;
    MLOG_INFO("trial {} extended to {}", tenant, common::iso8601_utc(record->expires_ms));
    (*shared_done)(std::move(*record));
  });
  if (!queued.is_ok()) (*shared_done)(queued);
}

void TrialService::remove(std::string tenant, std::function<void(Status)> done) {
  auto shared_done = std::make_shared<decltype(done)>(std::move(done));
  Status queued = post([this, tenant = std::move(tenant), shared_done]() {
    auto value = md::get(store_, trial_key(tenant));
    if (!value.is_ok()) {
      return (*shared_done)(value.status().code() == ErrorCode::kNotFound
                                ? Status::not_found("trial '" + tenant + "' does not exist")
                                : value.status());
    }
    Status st = delete_trial(tenant);
    if (st.is_ok()) MLOG_INFO("trial {} deleted by an operator", tenant);
    (*shared_done)(st);
  });
  if (!queued.is_ok()) (*shared_done)(queued);
}

}  // namespace magnetar::trial
