// Namespace bundles and who serves them, on Pulsar's routes:
//   GET /admin/v2/namespaces/{tenant}/{namespace}/bundles
//       {"boundaries": [...], "numBundles": N}, Pulsar's BundlesData
//   GET /admin/v2/namespaces/{tenant}/{namespace}/bundle-owners
//       [{"bundle", "owner", "alive", "releasing", "brokerUrl", "webServiceUrl", "load"}], "load" being
//       what the owner last reported about the bundle ({"msgRate", "bytesRate", "topics", "sessions"}; null
//       when it reported no loaded topic of it)
//   PUT /admin/v2/namespaces/{tenant}/{namespace}/unload
//   PUT /admin/v2/namespaces/{tenant}/{namespace}/{bundle}/unload[?destinationBroker=B]
//   PUT /admin/v2/namespaces/{tenant}/{namespace}/{bundle}/split[?unload=true&splitAlgorithmName=A]
//       A: range_equally_divide (the default: halves), topic_count_equally_divide
//       (at the median hash of the bundle's topics), specified_positions_divide
//       (at the hashes the body lists, a JSON array of numbers)
//   GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/bundle: the bundle the topic falls in
// An unload closes the bundle's topics on its owner (clients are told and
// look them up again) and hands the bundle to `destinationBroker` (a node id,
// or host:port of its web or Pulsar service) or to the live broker owning
// the fewest bundles. A standalone node closes the topics and serves them
// again at their next use.
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include "admin/handlers.h"
#include "admin/handlers/policy_json.h"
#include "admin/handlers/tenancy_common.h"
#include "admin/handlers/topic_common.h"
#include "broker/broker_service.h"
#include "broker/bundle_layout.h"
#include "broker/ownership.h"
#include "broker/tenancy.h"

namespace magnetar::admin {

using common::Result;
using common::Status;

namespace {

// The node `broker` names: its id, or host:port of one of its service URLs.
Result<uint64_t> destination_node(const broker::Ownership& ownership, const std::string& broker) {
  if (broker.empty()) return uint64_t{0};
  const bool by_id = broker.find_first_not_of("0123456789") == std::string::npos && broker.size() < 20;
  const uint64_t id = by_id ? std::strtoull(broker.c_str(), nullptr, 10) : 0;
  auto names = [&broker](const std::string& url) {
    return !url.empty() && url.size() >= broker.size() &&
           url.compare(url.size() - broker.size(), broker.size(), broker) == 0 &&
           (url.size() == broker.size() || url[url.size() - broker.size() - 1] == '/');
  };
  for (const auto& node : ownership.live_nodes()) {
    if (by_id ? node.node == id : names(node.http_url) || names(node.pulsar_url) || names(node.pulsar_tls_url)) {
      return node.node;
    }
  }
  return Status::invalid_argument("destinationBroker " + broker + " is not a live broker (a node id or host:port)");
}

// Unloads `bundles` of `ns`, answering once every one is done (the first
// failure, if any).
void unload_bundles(TopicServices& services, const broker::NamespaceName& ns, std::vector<std::string> bundles,
                    uint64_t destination, const SharedResponder& respond) {
  struct Gather {
    std::mutex mu;
    size_t left;
    Status first_failure = Status::ok();
    SharedResponder respond;
  };
  auto g = std::make_shared<Gather>();
  g->left = bundles.size();
  g->respond = respond;
  auto one_done = [g](Status st) {
    std::lock_guard lock(g->mu);
    if (!st.is_ok() && g->first_failure.is_ok()) g->first_failure = st;
    if (--g->left == 0) (*g->respond)(empty_or_error(g->first_failure));
  };
  broker::Ownership* ownership = services.broker.ownership();
  for (const auto& range : bundles) {
    std::string bundle = ns.tenant + "/" + ns.local + "/" + range;
    if (ownership == nullptr) {
      services.broker.unload_bundle(bundle, [one_done]() { one_done(Status::ok()); });
    } else {
      ownership->unload(bundle, destination, one_done);
    }
  }
}

// The hash that halves the topics metadata knows in [low, high] of `ns`.
Result<uint32_t> median_topic_hash(broker::Tenancy& tenancy, const broker::NamespaceName& ns, uint32_t low,
                                   uint32_t high) {
  std::vector<uint32_t> hashes;
  for (auto domain : {broker::TopicDomain::kPersistent, broker::TopicDomain::kNonPersistent}) {
    auto names = tenancy.known_topics(ns, domain);
    if (!names.is_ok()) return names.status();
    for (const auto& name : *names) {
      auto topic = broker::TopicName::parse(name);
      if (!topic.is_ok()) continue;
      const uint32_t h = broker::topic_hash(*topic);
      if (h >= low && (h < high || high == 0xffffffffu)) hashes.push_back(h);
    }
  }
  std::sort(hashes.begin(), hashes.end());
  hashes.erase(std::unique(hashes.begin(), hashes.end()), hashes.end());
  if (hashes.size() < 2) {
    return Status::failed_precondition("bundle " + broker::range_name(low, high) + " holds " +
                                       std::to_string(hashes.size()) + " topics; topic_count_equally_divide needs two");
  }
  // The cut is the first hash of the upper half, so the lower half keeps hashes[0 .. n/2).
  return hashes[hashes.size() / 2];
}

// The split positions a request's body lists: a JSON array of hashes.
Result<std::vector<uint32_t>> body_positions(const std::string& body) {
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array() || j.empty()) {
    return Status::invalid_argument("specified_positions_divide needs a JSON array of hash positions as the body");
  }
  std::vector<uint32_t> out;
  for (const auto& v : j) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > 0xffffffffu) {
      return Status::invalid_argument("split positions are numbers from 0 to 4294967295");
    }
    out.push_back(static_cast<uint32_t>(v.get<uint64_t>()));
  }
  return out;
}

}  // namespace

void register_bundle_routes(Router& router, TopicServices& services) {
  TopicServices* s = &services;
  const std::string ns_path = "/admin/v2/namespaces/{tenant}/{namespace}";
  router.get(ns_path + "/bundles", [s](HttpRequest& req, Responder respond) {
    run_blocking(s->tenancy, std::move(respond), [s, t = req.param("tenant"), n = req.param("namespace")]() {
      auto ns = broker::NamespaceName::of(t, n);
      if (!ns.is_ok()) return error_response(ns.status());
      auto p = s->tenancy.get_policies(*ns);
      if (!p.is_ok()) return error_response(p.status());
      return HttpResponse::json(200, bundles_json(*ns));
    });
  });
  router.get(ns_path + "/bundle-owners", [s](HttpRequest& req, Responder respond) {
    run_blocking(s->tenancy, std::move(respond), [s, t = req.param("tenant"), n = req.param("namespace")]() {
      auto ns = broker::NamespaceName::of(t, n);
      if (!ns.is_ok()) return error_response(ns.status());
      auto p = s->tenancy.get_policies(*ns);
      if (!p.is_ok()) return error_response(p.status());
      Json out = Json::array();
      broker::Ownership* ownership = s->broker.ownership();
      if (ownership == nullptr) {
        // A standalone node serves every bundle.
        Json here = lookup_json(s->address);
        for (const auto& range : broker::namespace_bundles(*ns)) {
          out.push_back({{"bundle", range}, {"owner", 0}, {"alive", true}, {"releasing", false},
                         {"brokerUrl", here["brokerUrl"]}, {"webServiceUrl", here["httpUrl"]}, {"load", nullptr}});
        }
        return HttpResponse::json(200, out);
      }
      auto nodes = ownership->live_nodes();
      // What each bundle's owner last reported about it.
      std::map<std::pair<uint64_t, std::string>, Json> reported;
      if (s->cluster_load) {
        auto load = s->cluster_load();
        if (load.is_ok() && load->contains("brokers") && (*load)["brokers"].is_array()) {
          for (const auto& report : (*load)["brokers"]) {
            if (!report.is_object() || !report.contains("bundles") || !report["bundles"].is_object()) continue;
            const auto node = report.value("node", uint64_t{0});
            for (const auto& [bundle, figures] : report["bundles"].items()) reported[{node, bundle}] = figures;
          }
        }
      }
      const std::string prefix = ns->tenant + "/" + ns->local + "/";
      for (const auto& b : ownership->bundles_in(*ns)) {
        Json entry{{"bundle", b.range}, {"owner", b.node}, {"alive", b.alive}, {"releasing", b.releasing},
                   {"brokerUrl", nullptr}, {"webServiceUrl", nullptr}, {"load", nullptr}};
        if (auto it = reported.find({b.node, prefix + b.range}); it != reported.end()) entry["load"] = it->second;
        for (const auto& node : nodes) {
          if (node.node != b.node) continue;
          entry["brokerUrl"] = node.pulsar_url;
          entry["webServiceUrl"] = node.http_url;
        }
        out.push_back(std::move(entry));
      }
      return HttpResponse::json(200, out);
    });
  });
  for (const char* domain : {"persistent", "non-persistent"}) {
    auto d = std::string(domain) == "persistent" ? broker::TopicDomain::kPersistent : broker::TopicDomain::kNonPersistent;
    router.get("/admin/v2/" + std::string(domain) + "/{tenant}/{namespace}/{topic}/bundle",
               [d](HttpRequest& req, Responder respond) {
                 auto topic = route_topic(d, req);
                 if (!topic.is_ok()) return respond(error_response(topic.status()));
                 respond(HttpResponse::json(200, Json(broker::bundle_of(*topic))));
               });
  }
  auto unload = [s](HttpRequest& req, Responder respond, bool one_bundle) {
    auto shared = std::make_shared<Responder>(std::move(respond));
    auto ns = broker::NamespaceName::of(req.param("tenant"), req.param("namespace"));
    if (!ns.is_ok()) return (*shared)(error_response(ns.status()));
    std::vector<std::string> bundles = broker::namespace_bundles(*ns);
    if (one_bundle) {
      std::string range = req.param("bundle");
      if (std::find(bundles.begin(), bundles.end(), range) == bundles.end()) {
        return (*shared)(error_response(Status::not_found("namespace " + ns->to_string() + " has no bundle " + range)));
      }
      bundles = {range};
    }
    uint64_t destination = 0;
    auto it = req.query.find("destinationBroker");
    if (it != req.query.end() && s->broker.ownership() != nullptr) {
      auto node = destination_node(*s->broker.ownership(), it->second);
      if (!node.is_ok()) return (*shared)(error_response(node.status()));
      destination = *node;
    }
    Status st = s->tenancy.submit([s, shared, ns = *ns, bundles, destination]() {
      auto p = s->tenancy.get_policies(ns);
      if (!p.is_ok()) return (*shared)(error_response(p.status()));
      unload_bundles(*s, ns, bundles, destination, shared);
    });
    if (!st.is_ok()) (*shared)(error_response(st));
  };
  router.put(ns_path + "/{bundle}/split", [s](HttpRequest& req, Responder respond) {
    auto shared = std::make_shared<Responder>(std::move(respond));
    auto ns = broker::NamespaceName::of(req.param("tenant"), req.param("namespace"));
    if (!ns.is_ok()) return (*shared)(error_response(ns.status()));
    auto range = broker::parse_range(req.param("bundle"));
    if (!range.is_ok()) return (*shared)(error_response(range.status()));
    std::string algorithm = "range_equally_divide";
    if (auto it = req.query.find("splitAlgorithmName"); it != req.query.end() && !it->second.empty()) {
      algorithm = it->second;
    }
    std::vector<uint32_t> positions;
    if (algorithm == "specified_positions_divide") {
      auto listed = body_positions(req.body);
      if (!listed.is_ok()) return (*shared)(error_response(listed.status()));
      positions = std::move(*listed);
    } else if (algorithm != "range_equally_divide" && algorithm != "topic_count_equally_divide") {
      return (*shared)(error_response(Status::invalid_argument(
          "splitAlgorithmName " + algorithm +
          " is not one of range_equally_divide, topic_count_equally_divide, specified_positions_divide")));
    }
    const bool unload = query_flag(req, "unload");
    Status st = s->tenancy.submit([s, shared, ns = *ns, range = *range, algorithm, positions, unload]() mutable {
      auto p = s->tenancy.get_policies(ns);
      if (!p.is_ok()) return (*shared)(error_response(p.status()));
      if (algorithm == "topic_count_equally_divide") {
        auto median = median_topic_hash(s->tenancy, ns, range.first, range.second);
        if (!median.is_ok()) return (*shared)(error_response(median.status()));
        positions = {*median};
      }
      std::string bundle = ns.tenant + "/" + ns.local + "/" + broker::range_name(range.first, range.second);
      s->broker.split_bundle(bundle, std::move(positions), unload,
                             [shared](Status done) { (*shared)(empty_or_error(done)); });
    });
    if (!st.is_ok()) (*shared)(error_response(st));
  });
  router.put(ns_path + "/unload",
             [unload](HttpRequest& req, Responder respond) { unload(req, std::move(respond), false); });
  router.put(ns_path + "/{bundle}/unload",
             [unload](HttpRequest& req, Responder respond) { unload(req, std::move(respond), true); });
}

}  // namespace magnetar::admin
