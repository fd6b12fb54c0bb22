// Non-partitioned topics on Pulsar's layout, for both domains:
//   PUT    /admin/v2/{domain}/{tenant}/{namespace}/{topic}          create (within maxTopicsPerNamespace and the tenant's maxTopics)
//   DELETE /admin/v2/{domain}/{tenant}/{namespace}/{topic}[?force=true]
//   DELETE /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions[?force=true]  with the partitions' data
//   PUT    /admin/v2/{domain}/{tenant}/{namespace}/{topic}/unload
//   GET    /admin/v2/{domain}/{tenant}/{namespace}                  list
//   GET    /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}
//   GET    /admin/v2/namespaces/{tenant}/{namespace}/topics       both domains
#include <set>

#include <fmt/format.h>

#include "admin/handlers.h"
#include "admin/handlers/policy_json.h"
#include "admin/handlers/tenancy_common.h"
#include "admin/handlers/topic_common.h"
#include "broker/topic_lifecycle.h"
#include "broker/tracing.h"

namespace magnetar::admin {

using broker::TopicDomain;
using broker::TopicName;
using common::Result;
using common::Status;

namespace {

// Runs `work` on the tenancy thread with the route's topic; `work` answers.
void on_tenancy(TopicServices& s, TopicDomain domain, HttpRequest& req, Responder respond,
                std::function<void(const TopicName&, SharedResponder)> work) {
  auto shared = std::make_shared<Responder>(std::move(respond));
  auto name = route_topic(domain, req);
  if (!name.is_ok()) return (*shared)(error_response(name.status()));
  Status st = s.tenancy.submit([shared, topic = *name, work = std::move(work)]() { work(topic, shared); });
  if (!st.is_ok()) (*shared)(error_response(st));
}

// Both domains, persistent first.
Result<std::vector<std::string>> namespace_topics(TopicServices& s, const broker::NamespaceName& ns) {
  std::vector<std::string> all;
  for (TopicDomain d : {TopicDomain::kPersistent, TopicDomain::kNonPersistent}) {
    auto part = s.tenancy.known_topics(ns, d);
    if (!part.is_ok()) return part.status();
    all.insert(all.end(), part->begin(), part->end());
  }
  return all;
}

// Why `topic` may not be created as a non-partitioned topic, if it may not.
Status check_creatable(TopicServices& s, const TopicName& topic) {
  broker::Tenancy& tenancy = s.tenancy;
  auto partitions = tenancy.get_partitions(topic);
  if (!partitions.is_ok()) return partitions.status();
  if (*partitions > 0) return Status::already_exists("Topic " + topic.to_string() + " is a partitioned topic");
  if (topic.is_partition()) {
    auto base = tenancy.get_partitions(topic.base());
    if (!base.is_ok()) return base.status();
    if (topic.partition < *base) return Status::already_exists("Topic " + topic.to_string() + " already exists");
    return Status::failed_precondition("Topic " + topic.to_string() +
                                       " is named like a partition of a topic that has no such partition");
  }
  // The broker checks the topic counts again as it creates the topic (as
  // for every other way a topic is made); asked here too, the answer does
  // not wait for its policy cache to see a limit set a moment ago.
  return tenancy.admit_topic(topic);
}

}  // namespace

void register_topic_routes(Router& router, TopicServices& services) {
  TopicServices* s = &services;
  // Registered before the namespace routes, so this one (which knows loaded
  // topics) answers instead of their metadata-only listing.
  router.get("/admin/v2/namespaces/{tenant}/{namespace}/topics", [s](HttpRequest& req, Responder respond) {
    run_blocking(s->tenancy, std::move(respond), [s, tenant = req.param("tenant"), ns = req.param("namespace")]() {
      auto name = broker::NamespaceName::of(tenant, ns);
      if (!name.is_ok()) return error_response(name.status());
      auto all = namespace_topics(*s, *name);
      return all.is_ok() ? HttpResponse::json(200, Json(*all)) : error_response(all.status());
    });
  });
  for (TopicDomain d : {TopicDomain::kPersistent, TopicDomain::kNonPersistent}) {
    const std::string domain(broker::domain_name(d));
    const std::string base = "/admin/v2/" + domain + "/{tenant}/{namespace}";
    const std::string topic = base + "/{topic}";

    router.put(topic, [s, d](HttpRequest& req, Responder respond) {
      on_tenancy(*s, d, req, std::move(respond), [s, target = req.target](const TopicName& t, SharedResponder r) {
        Status st = check_creatable(*s, t);
        if (!st.is_ok()) return respond_status(r, st);
        s->broker.create_topic(t, [s, t, target, r](Status created) {
          if (created.is_ok()) return respond_status(r, created);
          (*r)(topic_error_response(*s, t, target, created));
        });
      });
    });

    router.del(topic, [s, d](HttpRequest& req, Responder respond) {
      const bool force = query_flag(req, "force");
      on_tenancy(*s, d, req, std::move(respond), [s, force](const TopicName& t, SharedResponder r) {
        auto partitions = s->tenancy.get_partitions(t);
        if (!partitions.is_ok()) return respond_status(r, partitions.status());
        if (*partitions > 0) {
          return respond_status(r, Status::already_exists("Topic " + t.to_string() +
                                                          " is a partitioned topic: delete it with /partitions"));
        }
        broker::delete_topic_with_data(s->broker, s->tenancy, t, force, [r](Status st) { respond_status(r, st); });
      });
    });

    // As in Pulsar: the partitions go with their data.
    router.del(topic + "/partitions", [s, d](HttpRequest& req, Responder respond) {
      const bool force = query_flag(req, "force");
      on_tenancy(*s, d, req, std::move(respond), [s, force](const TopicName& t, SharedResponder r) {
        auto partitions = s->tenancy.get_partitions(t);
        if (!partitions.is_ok()) return respond_status(r, partitions.status());
        if (*partitions == 0) return respond_status(r, Status::not_found("Partitioned topic " + t.to_string() + " does not exist"));
        broker::delete_topic_with_data(s->broker, s->tenancy, t, force, [r](Status st) { respond_status(r, st); });
      });
    });

    router.put(topic + "/unload", [s, d](HttpRequest& req, Responder respond) {
      on_existing_topic(*s, d, req, std::move(respond), [s](broker::Topic& t, SharedResponder r) {
        s->broker.unload_topic(t.name(), [r](Status st) { respond_status(r, st); });
      });
    });

    router.get(base, [s, d](HttpRequest& req, Responder respond) {
      run_blocking(s->tenancy, std::move(respond), [s, d, tenant = req.param("tenant"), ns = req.param("namespace")]() {
        auto name = broker::NamespaceName::of(tenant, ns);
        if (!name.is_ok()) return error_response(name.status());
        auto all = s->tenancy.known_topics(*name, d);
        return all.is_ok() ? HttpResponse::json(200, Json(*all)) : error_response(all.status());
      });
    });

    router.get("/lookup/v2/topic/" + domain + "/{tenant}/{namespace}/{topic}", [s, d](HttpRequest& req,
                                                                                   Responder respond) {
      on_tenancy(*s, d, req, std::move(respond), [s](const TopicName& t, SharedResponder r) {
        auto partitions = s->tenancy.get_partitions(t);  // the namespace must exist
        if (!partitions.is_ok()) return respond_status(r, partitions.status());
        if (broker::Ownership* ownership = s->broker.ownership()) {
          // A cluster member names the owner; this one answers for itself below.
          ownership->owner_of(t, [s, t, r](common::Result<broker::NodeEndpoints> owner) {
            if (!owner.is_ok()) return respond_status(r, owner.status());
            if (owner->here) return (*r)(HttpResponse::json(200, lookup_json(s->address)));
            (*r)(HttpResponse::json(200, Json{{"brokerUrl", owner->pulsar_url},
                                              {"brokerUrlTls", owner->pulsar_tls_url},
                                              {"httpUrl", owner->http_url},
                                              {"httpUrlTls", ""},
                                              {"nativeUrl", owner->pulsar_url.empty() ? owner->pulsar_tls_url
                                                                                      : owner->pulsar_url}}));
          });
          return;
        }
        (*r)(HttpResponse::json(200, lookup_json(s->address)));
      });
    });
  }
}

}  // namespace magnetar::admin
