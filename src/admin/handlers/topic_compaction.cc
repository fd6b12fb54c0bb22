// Topic compaction on Pulsar's layout (broker/compaction.h):
//   PUT /admin/v2/{domain}/{tenant}/{namespace}/{topic}/compaction   start a pass (204; 409 while one runs)
//   GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/compaction   the latest pass, as Pulsar's
//       LongRunningProcessStatus: {"status": NOT_RUN|RUNNING|SUCCESS|ERROR, "lastError": ""}, plus
//       "lastRun", what the latest pass that succeeded did (Magnetar's)
// A non-persistent topic is answered 412: compaction applies to persistent
// topics only. The compactionThreshold policy is among the shared policies
// (policy_routes.h).
#include "admin/handlers.h"
#include "admin/handlers/tenancy_common.h"
#include "admin/handlers/topic_common.h"
#include "broker/compaction.h"

namespace magnetar::admin {

using broker::TopicDomain;
using common::Status;

namespace {

Json compaction_json(const broker::CompactionReport& r) {
  Json out{{"status", std::string(broker::compaction_state_name(r.state))}, {"lastError", r.last_error}};
  if (r.state != broker::CompactionState::kNotRun) {
    const broker::CompactionOutcome& o = r.last;
    out["lastRun"] = Json{{"horizon", o.horizon.to_string()},
                          {"horizonIndex", o.horizon_index},
                          {"nothingToDo", o.nothing_to_do},
                          {"entriesRead", o.entries_read},
                          {"bytesRead", o.bytes_read},
                          {"entriesWritten", o.entries_written},
                          {"bytesWritten", o.bytes_written},
                          {"liveKeys", o.keys},
                          {"bytesBefore", o.bytes_before},
                          {"bytesAfter", o.bytes_after},
                          {"durationMs", o.duration_ms}};
  }
  return out;
}

Status not_persistent(HttpRequest& req) {
  return Status::failed_precondition("compaction applies to persistent topics only; non-persistent://" +
                                     req.param("tenant") + "/" + req.param("namespace") + "/" + req.param("topic") +
                                     " is not persistent");
}

}  // namespace

void register_topic_compaction_routes(Router& router, TopicServices& services) {
  TopicServices* s = &services;
  for (TopicDomain d : {TopicDomain::kPersistent, TopicDomain::kNonPersistent}) {
    const std::string path = "/admin/v2/" + std::string(broker::domain_name(d)) +
                             "/{tenant}/{namespace}/{topic}/compaction";
    router.put(path, [s, d](HttpRequest& req, Responder respond) {
      if (d != TopicDomain::kPersistent) return respond(error_response(not_persistent(req)));
      on_existing_topic(*s, d, req, std::move(respond), [](broker::Topic& t, SharedResponder r) {
        respond_status(r, t.start_compaction());
      });
    });
    router.get(path, [s, d](HttpRequest& req, Responder respond) {
      if (d != TopicDomain::kPersistent) return respond(error_response(not_persistent(req)));
      on_existing_topic(*s, d, req, std::move(respond), [s](broker::Topic& t, SharedResponder r) {
        (*r)(HttpResponse::json(200, compaction_json(s->broker.compactions().report(t.name().to_string()))));
      });
    });
  }
}

}  // namespace magnetar::admin
