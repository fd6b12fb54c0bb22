// Topic stats on Pulsar's layout, for both domains:
//   GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/stats
//   GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitioned-stats[?perPartition=false]
//   GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/internalStats
#include <mutex>

#include "admin/handlers.h"
#include "admin/handlers/tenancy_common.h"
#include "admin/handlers/topic_common.h"
#include "admin/handlers/topic_stats_json.h"

namespace magnetar::admin {

using broker::TopicDomain;
using broker::TopicName;
using common::Result;
using common::Status;

namespace {

// Gathers every partition's stats, each on its own home reactor; the last
// to answer responds.
void partitioned_stats(TopicServices* s, const TopicName& topic, int32_t partitions, bool per_partition,
                       SharedResponder r) {
  struct Gather {
    std::mutex mu;
    int32_t left;
    Status error;
    std::map<std::string, Json> stats;
  };
  auto g = std::make_shared<Gather>();
  g->left = partitions;
  for (int32_t i = 0; i < partitions; ++i) {
    TopicName p = topic.partition_of(i);
    s->broker.with_existing_topic(p, true, [g, r, per_partition, name = p.to_string()](Result<broker::Topic*> t) {
      Json j;
      if (t.is_ok()) j = topic_stats_json((*t)->stats_at(broker::RateMeter::Clock::now()));
      std::lock_guard<std::mutex> lock(g->mu);
      if (t.is_ok()) {
        g->stats[name] = std::move(j);
      } else if (g->error.is_ok()) {
        g->error = t.status();
      }
      if (--g->left > 0) return;
      if (!g->error.is_ok()) return (*r)(error_response(g->error));
      (*r)(HttpResponse::json(200, partitioned_stats_json(g->stats, per_partition)));
    });
  }
}

}  // namespace

void register_topic_stats_routes(Router& router, TopicServices& services) {
  TopicServices* s = &services;
  for (TopicDomain d : {TopicDomain::kPersistent, TopicDomain::kNonPersistent}) {
    const std::string topic = "/admin/v2/" + std::string(broker::domain_name(d)) + "/{tenant}/{namespace}/{topic}";

    router.get(topic + "/stats", [s, d](HttpRequest& req, Responder respond) {
      on_existing_topic(*s, d, req, std::move(respond), [](broker::Topic& t, SharedResponder r) {
        (*r)(HttpResponse::json(200, topic_stats_json(t.stats_at(broker::RateMeter::Clock::now()))));
      });
    });

    router.get(topic + "/internalStats", [s, d](HttpRequest& req, Responder respond) {
      on_existing_topic(*s, d, req, std::move(respond), [](broker::Topic& t, SharedResponder r) {
        (*r)(HttpResponse::json(200, internal_stats_json(t)));
      });
    });

    router.get(topic + "/partitioned-stats", [s, d](HttpRequest& req, Responder respond) {
      auto shared = std::make_shared<Responder>(std::move(respond));
      auto name = route_topic(d, req);
      if (!name.is_ok()) return (*shared)(error_response(name.status()));
      auto it = req.query.find("perPartition");
      const bool per_partition = it == req.query.end() || it->second != "false";
      Status st = s->tenancy.submit([s, shared, topic = *name, per_partition]() {
        auto n = s->tenancy.get_partitions(topic);
        if (!n.is_ok()) return (*shared)(error_response(n.status()));
        if (*n == 0) {
          return (*shared)(error_response(
              Status::not_found("Partitioned topic " + topic.to_string() + " not found")));
        }
        partitioned_stats(s, topic, *n, per_partition, shared);
      });
      if (!st.is_ok()) (*shared)(error_response(st));
    });
  }
}

}  // namespace magnetar::admin
