#include "admin/handlers/topic_common.h"

#include <fmt/format.h>

#include "admin/handlers/tenancy_common.h"

namespace magnetar::admin {

using broker::TopicName;
using common::Result;
using common::Status;

Result<TopicName> route_topic(broker::TopicDomain domain, const HttpRequest& req) {
  return TopicName::of(domain, req.param("tenant"), req.param("namespace"), req.param("topic"));
}

Json lookup_json(const AdvertisedAddress& a) {
  const uint16_t pulsar = a.pulsar_port ? a.pulsar_port() : 0;
  const uint16_t http = a.http_port ? a.http_port() : 0;
  const uint16_t pulsar_tls = a.pulsar_tls_port ? a.pulsar_tls_port() : 0;
  const uint16_t http_tls = a.http_tls_port ? a.http_tls_port() : 0;
  return Json{{"brokerUrl", pulsar ? fmt::format("pulsar://{}:{}", a.host, pulsar) : ""},
              {"brokerUrlTls", pulsar_tls ? fmt::format("pulsar+ssl://{}:{}", a.host, pulsar_tls) : ""},
              {"httpUrl", http ? fmt::format("http://{}:{}", a.host, http) : ""},
              {"httpUrlTls", http_tls ? fmt::format("https://{}:{}", a.host, http_tls) : ""},
              {"nativeUrl", pulsar       ? fmt::format("pulsar://{}:{}", a.host, pulsar)
                            : pulsar_tls ? fmt::format("pulsar+ssl://{}:{}", a.host, pulsar_tls)
                                         : ""}};
}

bool query_flag(const HttpRequest& req, const std::string& name) {
  auto it = req.query.find(name);
  return it != req.query.end() && it->second == "true";
}

void respond_status(const SharedResponder& respond, const Status& status) { (*respond)(empty_or_error(status)); }

HttpResponse topic_error_response(const TopicServices& services, const broker::TopicName& topic,
                                  const std::string& target, const Status& status) {
  broker::Ownership* ownership = services.broker.ownership();
  if (status.code() == common::ErrorCode::kWrongNode && ownership != nullptr) {
    auto owner = ownership->known_owner(topic);
    if (owner && !owner->here && !owner->http_url.empty()) {
      HttpResponse moved = HttpResponse::error(307, status.message());
      moved.headers.emplace_back("Location", owner->http_url + target);
      return moved;
    }
  }
  return error_response(status);
}

void on_existing_topic(TopicServices& services, broker::TopicDomain domain, HttpRequest& req, Responder respond,
                       TopicWork work) {
  auto shared = std::make_shared<Responder>(std::move(respond));
  auto name = route_topic(domain, req);
  if (!name.is_ok()) return (*shared)(error_response(name.status()));
  TopicServices* s = &services;
  Status st = services.tenancy.submit([s, shared, topic = *name, target = req.target, work = std::move(work)]() {
    auto partitions = s->tenancy.get_partitions(topic);
    if (!partitions.is_ok()) return (*shared)(error_response(partitions.status()));
    if (*partitions > 0) {
      return (*shared)(error_response(Status::not_found(
          "Topic " + topic.to_string() + " is a partitioned topic: use its partitions or partitioned-stats")));
    }
    const bool known = s->tenancy.require_topic(topic).is_ok();
    s->broker.with_existing_topic(topic, known, [s, shared, topic, target, work](Result<broker::Topic*> t) {
      if (!t.is_ok()) return (*shared)(topic_error_response(*s, topic, target, t.status()));
      work(**t, shared);
    });
  });
  if (!st.is_ok()) (*shared)(error_response(st));
}

}  // namespace magnetar::admin
