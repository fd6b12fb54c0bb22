// Calls another cluster's admin API as its cluster record here says: its
// web service URL (https when the record enables TLS for the link), the
// link's token, trusted certificates and client certificate. Used by
// configuration sync and by replicated subscriptions.
//
// Threads: blocking; the geo-replication service's threads, never a reactor.
#pragma once

#include <chrono>
#include <string>

#include "broker/tenancy.h"
#include "common/status.h"

namespace magnetar::georep {

// Sends `method` `path` (escaped by the caller) with a JSON `body` to
// `cluster`. A 307 answer (a member that does not serve the topic names
// the one that does) is followed once. OK for a 2xx answer; NotFound for
// 404; Unavailable for another answer (its status and body in the
// message), an unregistered cluster or one that cannot be reached.
common::Status call_remote_admin(broker::Tenancy& tenancy, const std::string& cluster, const std::string& method,
                                 const std::string& path, const std::string& body,
                                 std::chrono::milliseconds timeout);

}  // namespace magnetar::georep
