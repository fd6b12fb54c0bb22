// Partitioned-topic metadata on Pulsar's layout, for both domains:
//   PUT|POST|GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions
// (DELETE, which deletes the partitions' data too, is in topics.cc)
//   GET /admin/v2/{domain}/{tenant}/{namespace}/partitioned
// PUT and POST take the partition count as a bare JSON integer.
#include "admin/handlers.h"
#include "admin/handlers/policy_json.h"
#include "admin/handlers/tenancy_common.h"

namespace magnetar::admin {

using broker::TopicDomain;
using broker::TopicName;

namespace {

Handler topic_handler(broker::Tenancy& tenancy, TopicDomain domain,
                      std::function<HttpResponse(broker::Tenancy&, const TopicName&, const std::string& body)> work) {
  return [&tenancy, domain, work = std::move(work)](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond),
                 [&tenancy, domain, work, t = req.param("tenant"), n = req.param("namespace"),
                  topic = req.param("topic"), body = req.body]() {
                   auto name = TopicName::of(domain, t, n, topic);
                   if (!name.is_ok()) return error_response(name.status());
                   return work(tenancy, *name, body);
                 });
  };
}

Handler namespace_handler(
    broker::Tenancy& tenancy,
    std::function<common::Result<std::vector<std::string>>(broker::Tenancy&, const broker::NamespaceName&)> list) {
  return [&tenancy, list = std::move(list)](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond),
                 [&tenancy, list, t = req.param("tenant"), n = req.param("namespace")]() {
                   auto ns = broker::NamespaceName::of(t, n);
                   if (!ns.is_ok()) return error_response(ns.status());
                   auto r = list(tenancy, *ns);
                   return r.is_ok() ? HttpResponse::json(200, *r) : error_response(r.status());
                 });
  };
}

common::Result<int32_t> partitions_body(const std::string& body) {
  auto j = parse_json_body(body);
  if (!j.is_ok()) return j.status();
  return json_int32(*j, "the number of partitions");
}

}  // namespace

void register_partitioned_topic_routes(Router& router, broker::Tenancy& tenancy) {
  for (TopicDomain d : {TopicDomain::kPersistent, TopicDomain::kNonPersistent}) {
    std::string base = "/admin/v2/" + std::string(broker::domain_name(d)) + "/{tenant}/{namespace}";
    std::string partitions = base + "/{topic}/partitions";
    router.put(partitions, topic_handler(tenancy, d, [](broker::Tenancy& t, const TopicName& topic, const std::string& body) {
                 auto n = partitions_body(body);
                 if (!n.is_ok()) return error_response(n.status());
                 return empty_or_error(t.create_partitioned_topic(topic, *n));
               }));
    router.post(partitions, topic_handler(tenancy, d, [](broker::Tenancy& t, const TopicName& topic, const std::string& body) {
                  auto n = partitions_body(body);
                  if (!n.is_ok()) return error_response(n.status());
                  return empty_or_error(t.update_partitions(topic, *n));
                }));
    router.get(partitions, topic_handler(tenancy, d, [](broker::Tenancy& t, const TopicName& topic, const std::string&) {
                 auto n = t.get_partitions(topic);
                 return n.is_ok() ? HttpResponse::json(200, Json{{"partitions", *n}}) : error_response(n.status());
               }));
    router.get(base + "/partitioned", namespace_handler(tenancy, [d](broker::Tenancy& t, const broker::NamespaceName& ns) {
                 return t.list_partitioned_topics(ns, d);
               }));
  }
}

}  // namespace magnetar::admin
