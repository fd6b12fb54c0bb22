// TrialService: the free-trial mode (magnetar start --trial). A visitor
// signs up and gets a tenant of their own, with one namespace, a token whose
// role administers that tenant only, the tenant limits of TrialOptions and
// an expiry; once it passes, the tenant and everything in it are deleted.
//
// Metadata layout:
//   /trials/{tenant}    JSON TrialRecord: who, when made, when it expires
// The record is written before the tenant is made and deleted after the
// tenant is gone, so a sign-up or a deletion cut short by a crash is
// finished by the sweeper after the restart: expiry lives in metadata, not
// in memory.
//
// Threads: one "trial" thread does every blocking step (metadata reads
// and writes, waiting for topics to be deleted) and sweeps expired trials
// at their expiry. Tenancy operations are handed to the tenancy thread and
// waited for there. Public methods may be called from any thread; their
// callbacks run on the trial thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/policies.h"
#include "common/result.h"
#include "runtime/component.h"
#include "runtime/task.h"
#include "security/jwt.h"
#include "trial/signup_limiter.h"

namespace magnetar::metadata {
class Store;
}
namespace magnetar::broker {
class BrokerService;
class PolicyCache;
class Tenancy;
}

namespace magnetar::trial {

struct TrialOptions {
  std::chrono::seconds expiry{24 * 3600};
  // Empty: anyone may sign up; otherwise a sign-up must bring one of these.
  std::vector<std::string> invite_codes;
  std::string namespace_name = "sandbox";  // each trial tenant's one namespace
  std::string cluster = "standalone";       // the cluster trial tenants may use
  broker::TenantLimits limits;              // what each trial tenant may use
  SignupLimiter::Limits signups;
  uint32_t max_trials = 1000;  // live trial tenants at once; sign-ups past it are refused
};

struct TrialRecord {
  std::string tenant;
  std::string ns;       // "tenant/namespace"
  std::string role;     // the token's subject
  std::string address;  // the client address that signed up
  int64_t created_ms = 0;
  int64_t expires_ms = 0;
  nlohmann::json to_json() const;
  static common::Result<TrialRecord> from_json(const std::string& text);
};

struct SignupRequest {
  std::string address;      // the client's IP
  std::string invite_code;  // as sent; may be empty
};

struct Signup {
  TrialRecord record;
  std::string token;  // shown once: it is not stored
};

class TrialService final : public runtime::Component {
 public:
  // `signing_key` makes visitors' tokens (the key the node's authenticator
  // verifies with). Every reference must outlive this service.
  TrialService(broker::Tenancy& tenancy, broker::BrokerService& broker, metadata::Store& store,
               const broker::PolicyCache& policies, security::TokenKey signing_key, TrialOptions options);
  ~TrialService() override;

  std::string_view name() const override { return "trial"; }
  // Main thread. Reads every trial record (their expiries), then sweeps.
  common::Status start() override;
  void stop() override;

  const TrialOptions& options() const { return options_; }

  // Any thread. Checks the invite code and the sign-up rate first: a
  // refusal past the rate is kResourceExhausted and sets *retry_after_secs.
  // Then makes the trial on the trial thread and calls `done` there.
  void sign_up(SignupRequest request, int64_t* retry_after_secs, std::function<void(common::Result<Signup>)> done);
  // Any thread; `done` runs on the trial thread.
  void list(std::function<void(common::Result<std::vector<TrialRecord>>)> done);
  // Moves a trial's expiry `by` later (from now when it is already due).
  void extend(std::string tenant, std::chrono::seconds by, std::function<void(common::Result<TrialRecord>)> done);
  // Deletes a trial now, its tenant and all its data with it.
  void remove(std::string tenant, std::function<void(common::Status)> done);

  // What every trial tenant's name starts with.
  static constexpr std::string_view kTenantPrefix = "trial-";
  static constexpr size_t kMaxQueuedTasks = 256;

 private:
  // Trial thread.
  void run();
  common::Status post(runtime::Task task);
  common::Result<Signup> make_trial(const SignupRequest& request);
  common::Status delete_trial(const std::string& tenant);
  common::Status delete_tenant_data(const std::string& tenant);
  common::Result<std::vector<TrialRecord>> read_records();
  common::Status write_record(const TrialRecord& record, int64_t expected_version);
  void sweep_due();
  // Runs `fn` on the tenancy thread and waits for it (bounded).
  common::Status on_tenancy(std::function<common::Status()> fn);
  // Waits (bounded) until the policy cache knows `record`'s tenant, its
  // limits and its namespace, so the token works the moment it is handed out.
  void await_policies(const TrialRecord& record);

  broker::Tenancy& tenancy_;
  broker::BrokerService& broker_;
  metadata::Store& store_;
  const broker::PolicyCache& policies_;
  const security::TokenKey signing_key_;
  const TrialOptions options_;
  SignupLimiter limiter_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<runtime::Task> tasks_;  // guarded by mu_
  bool stopping_ = false;            // guarded by mu_
  std::thread thread_;
  // Trial thread only: tenant -> expiry (ms since the epoch).
  std::map<std::string, int64_t> expiries_;
};

// "/trials/{tenant}".
std::string trial_key(std::string_view tenant);

}  // namespace magnetar::trial
