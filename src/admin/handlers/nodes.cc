// The nodes of the cluster: /admin/v2/cluster/nodes (decommissioning a
// storage node, the storage nodes and self-healing at a glance), and Pulsar's /admin/v2/brokers/leaderBroker and
// /admin/v2/brokers/{cluster}.
#include <nlohmann/json.hpp>

#include "admin/handlers.h"
#include "admin/handlers/tenancy_common.h"

namespace magnetar::admin {

namespace {

nlohmann::json node_json(const NodeView& node) {
  nlohmann::json j = node.record.is_object() ? node.record : nlohmann::json::object();
  j["id"] = node.id;
  j["clusterAddress"] = node.cluster_address;
  j["raftRole"] = node.raft_role;
  j["leader"] = node.leader;
  j["alive"] = node.alive;
  j["appliedIndex"] = node.applied_index;
  if (!j.contains("ownedBundles")) j["ownedBundles"] = nlohmann::json::array();
  return j;
}

// "host:port" of a node's web service, as Pulsar names brokers.
std::string broker_id(const NodeView& node) {
  std::string url = node.record.is_object() ? node.record.value("httpUrl", "") : "";
  auto scheme = url.find("://");
  return scheme == std::string::npos ? url : url.substr(scheme + 3);
}

common::Result<uint64_t> node_param(const HttpRequest& req) {
  const std::string text = req.param("node");
  char* end = nullptr;
  const unsigned long long id = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || end == nullptr || *end != '\0' || text[0] == '-' || id == 0) {
    return common::Status::invalid_argument("'" + text + "' is not a node id (GET /admin/v2/cluster/nodes lists them)");
  }
  return static_cast<uint64_t>(id);
}

}  // namespace

void register_storage_node_routes(Router& router, broker::Tenancy& tenancy, StorageNodesAdmin admin) {
  auto shared = std::make_shared<StorageNodesAdmin>(std::move(admin));
  router.get("/admin/v2/cluster/storage", [&tenancy, shared](HttpRequest&, Responder respond) {
    run_blocking(tenancy, std::move(respond), [shared]() {
      auto view = shared->overview();
      return view.is_ok() ? HttpResponse::json(200, *view) : error_response(view.status());
    });
  });
  const std::string path = "/admin/v2/cluster/nodes/{node}/decommission";
  router.get(path, [&tenancy, shared](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond), [shared, node = node_param(req)]() {
      if (!node.is_ok()) return error_response(node.status());
      auto status = shared->status(*node);
      if (!status.is_ok()) return error_response(status.status());
      return HttpResponse::json(200, *status);
    });
  });
  for (bool drain : {true, false}) {
    auto handler = [&tenancy, shared, drain](HttpRequest& req, Responder respond) {
      run_blocking(tenancy, std::move(respond), [shared, drain, node = node_param(req)]() {
        if (!node.is_ok()) return error_response(node.status());
        common::Status st = shared->set_draining(*node, drain);
        if (!st.is_ok()) return error_response(st);
        auto status = shared->status(*node);
        if (!status.is_ok()) return error_response(status.status());
        return HttpResponse::json(200, *status);
      });
    };
    if (drain) {
      router.post(path, handler);
    } else {
      router.del(path, handler);
    }
  }
}

void register_node_routes(Router& router, broker::Tenancy& tenancy, std::string cluster_name, NodeDirectory nodes) {
  router.get("/admin/v2/cluster/nodes", [&tenancy, nodes](HttpRequest&, Responder respond) {
    run_blocking(tenancy, std::move(respond), [nodes]() {
      auto list = nodes();
      if (!list.is_ok()) return error_response(list.status());
      nlohmann::json out = nlohmann::json::array();
      for (const NodeView& node : *list) out.push_back(node_json(node));
      return HttpResponse::json(200, out);
    });
  });
  router.get("/admin/v2/brokers/leaderBroker", [&tenancy, nodes](HttpRequest&, Responder respond) {
    run_blocking(tenancy, std::move(respond), [nodes]() {
      auto list = nodes();
      if (!list.is_ok()) return error_response(list.status());
      for (const NodeView& node : *list) {
        if (!node.leader) continue;
        std::string url = node.record.is_object() ? node.record.value("httpUrl", "") : "";
        return HttpResponse::json(200, nlohmann::json{{"serviceUrl", url}, {"brokerId", broker_id(node)}});
      }
      return error_response(common::Status::unavailable("the cluster has no leader now"));
    });
  });
  router.get("/admin/v2/brokers/{cluster}", [&tenancy, nodes, cluster_name](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond), [nodes, cluster_name, cluster = req.param("cluster")]() {
      if (cluster != cluster_name) {
        return error_response(common::Status::not_found("cluster '" + cluster + "' is not this one ('" +
                                                        cluster_name + "')"));
      }
      auto list = nodes();
      if (!list.is_ok()) return error_response(list.status());
      nlohmann::json out = nlohmann::json::array();
      for (const NodeView& node : *list) {
        if (node.alive && !broker_id(node).empty()) out.push_back(broker_id(node));
      }
      return HttpResponse::json(200, out);
    });
  });
}

void register_load_routes(Router& router, broker::Tenancy& tenancy,
                          std::function<common::Result<nlohmann::json>()> load) {
  router.get("/admin/v2/cluster/load", [&tenancy, load](HttpRequest&, Responder respond) {
    run_blocking(tenancy, std::move(respond), [load]() {
      auto view = load();
      return view.is_ok() ? HttpResponse::json(200, *view) : error_response(view.status());
    });
  });
}

}  // namespace magnetar::admin
