// GET /admin/v2/overview: one document with what the web console's overview
// page shows: the node, counts of everything, totals of the loaded topics'
// rates and storage, and the largest backlogs.
#include <algorithm>
#include <chrono>
#include <set>

#include "admin/handlers.h"
#include "admin/handlers/policy_json.h"
#include "admin/handlers/tenancy_common.h"
#include "admin/handlers/topic_common.h"

namespace magnetar::admin {

namespace {

constexpr size_t kLargestBacklogs = 10;

struct Totals {
  size_t loaded_topics = 0;
  size_t producers = 0;
  size_t consumers = 0;
  size_t subscriptions = 0;
  uint64_t backlog = 0;
  uint64_t storage = 0;
  double msg_rate_in = 0, msg_rate_out = 0, byte_rate_in = 0, byte_rate_out = 0;
  uint64_t messages_in = 0, messages_out = 0;
  std::set<std::string> loaded_names;
  Json largest = Json::array();
};

Totals sum(const std::vector<broker::BrokerService::TopicSample>& samples) {
  Totals t;
  std::vector<const broker::BrokerService::TopicSample*> by_backlog;
  for (const auto& s : samples) {
    ++t.loaded_topics;
    t.loaded_names.insert(s.name.to_string());
    t.producers += s.stats.publishers.size();
    t.subscriptions += s.stats.subscriptions.size();
    for (const auto& sub : s.stats.subscriptions) t.consumers += sub.consumers;
    t.backlog += s.backlog_messages;
    t.storage += s.stats.storage_size;
    t.msg_rate_in += s.stats.msg_rate_in;
    t.msg_rate_out += s.stats.msg_rate_out;
    t.byte_rate_in += s.stats.byte_rate_in;
    t.byte_rate_out += s.stats.byte_rate_out;
    t.messages_in += s.stats.messages_in;
    t.messages_out += s.stats.messages_out;
    if (s.backlog_messages > 0) by_backlog.push_back(&s);
  }
  size_t n = std::min(kLargestBacklogs, by_backlog.size());
  std::partial_sort(by_backlog.begin(), by_backlog.begin() + n, by_backlog.end(),
                    [](auto* a, auto* b) { return a->backlog_messages > b->backlog_messages; });
  for (size_t i = 0; i < n; ++i) {
    t.largest.push_back({{"topic", by_backlog[i]->name.to_string()},
                         {"msgBacklog", by_backlog[i]->backlog_messages},
                         {"storageSize", by_backlog[i]->stats.storage_size}});
  }
  return t;
}

}  // namespace

void register_overview_routes(Router& router, TopicServices& services) {
  std::string version = MAGNETAR_VERSION;
  auto started = std::chrono::steady_clock::now();
  router.get("/admin/v2/overview", [&services, started, version](HttpRequest&, Responder respond) {
    auto responder = std::make_shared<Responder>(std::move(respond));
    services.broker.collect_stats([&services, responder, started, version](
                                      std::vector<broker::BrokerService::TopicSample> samples) {
      auto totals = std::make_shared<Totals>(sum(samples));
      run_blocking(services.tenancy, std::move(*responder), [&services, totals, started, version]() {
        broker::Tenancy& tenancy = services.tenancy;
        auto tenants = tenancy.list_tenants();
        if (!tenants.is_ok()) return error_response(tenants.status());
        size_t namespaces = 0;
        std::set<std::string> topics = totals->loaded_names;
        for (const auto& tenant : *tenants) {
          auto list = tenancy.list_namespaces(tenant);
          if (!list.is_ok()) continue;  // deleted meanwhile
          namespaces += list->size();
          for (const auto& full : *list) {
            auto ns = broker::NamespaceName::parse(full);
            if (!ns.is_ok()) continue;
            for (auto domain : {broker::TopicDomain::kPersistent, broker::TopicDomain::kNonPersistent}) {
              auto names = tenancy.list_topics(*ns, domain);
              if (names.is_ok()) topics.insert(names->begin(), names->end());
            }
          }
        }
        auto uptime = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        const Totals& t = *totals;
        Json body = {
            {"cluster", tenancy.local_cluster()},
            {"version", version},
            {"uptimeSeconds", uptime},
            {"tenants", tenants->size()},
            {"namespaces", namespaces},
            {"topics", topics.size()},
            {"loadedTopics", t.loaded_topics},
            {"producers", t.producers},
            {"consumers", t.consumers},
            {"subscriptions", t.subscriptions},
            {"msgRateIn", t.msg_rate_in},
            {"msgRateOut", t.msg_rate_out},
            {"msgThroughputIn", t.byte_rate_in},
            {"msgThroughputOut", t.byte_rate_out},
            {"msgInCounter", t.messages_in},
            {"msgOutCounter", t.messages_out},
            {"msgBacklog", t.backlog},
            {"storageSize", t.storage},
            {"largestBacklogs", t.largest},
        };
        return HttpResponse::json(200, body);
      });
    });
  });
}

}  // namespace magnetar::admin
