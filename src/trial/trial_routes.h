// The trial's HTTP routes:
//   GET    /trial/config                      open: whether sign-up needs an invite code, the expiry, the
//                                             limits a trial gets and the addresses to connect to
//   POST   /trial/signup                      open: {"inviteCode": "..."} (optional) -> 201 with the new
//                                             tenant, its token (shown only here), expiry, limits and
//                                             addresses; 429 with Retry-After past the sign-up rate, 403
//                                             for a missing or wrong invite code, 503 when full
//   GET    /admin/v2/trials                   superuser: every trial, soonest expiry first
//   POST   /admin/v2/trials/{tenant}/extend   superuser: {"seconds": N} (or ?seconds=N) later
//   DELETE /admin/v2/trials/{tenant}          superuser: deletes the trial and its data now
#pragma once

#include <functional>

#include <nlohmann/json.hpp>

#include "admin/admin_service.h"
#include "trial/trial_service.h"

namespace magnetar::trial {

// Registers the routes on `admin` and opens the two /trial routes to
// visitors without a token. `addresses` answers {"pulsar": "pulsar://...",
// "http": ..., "kafka": "host:port", "amqp": ...} once the listeners are
// bound. Before admin.start().
void register_trial_routes(admin::AdminService& admin, TrialService& trials,
                           std::function<nlohmann::json()> addresses);

}  // namespace magnetar::trial
