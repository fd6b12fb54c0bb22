#include "server/storage_node.h"

#include <algorithm>
#include <utility>

#include "common/logging.h"
#include "runtime/reactor.h"

namespace magnetar::server {

using common::Result;
using common::Status;
using replication::StorageMethod;

StorageNodeService::StorageNodeService(cluster::ClusterNode& cluster, storage::Storage& local,
                                       std::string fence_dir)
    : cluster_(cluster), server_(local, std::move(fence_dir)) {}

StorageNodeService::~StorageNodeService() { stop(); }

Status StorageNodeService::start() {
  if (started_) return Status::ok();
  MAGNETAR_RETURN_IF_ERROR(server_.start());
  for (StorageMethod m : {StorageMethod::kAdd, StorageMethod::kRead, StorageMethod::kFence, StorageMethod::kDelete}) {
    cluster_.handle(static_cast<uint16_t>(m), [this, m](std::string_view payload, std::function<void(std::string)> reply) {
      serve(m, payload, std::move(reply));
    });
  }
  started_ = true;
  return Status::ok();
}

void StorageNodeService::stop() {
  if (!started_) return;
  started_ = false;
  // Requests still arriving find the local storage stopping and fail; the
  // fences close after the reactor ran what it had.
  cluster_.reactor().run_sync([this]() { server_.stop(); });
}

void StorageNodeService::serve(StorageMethod method, std::string_view payload,
                               replication::StorageServer::Reply reply) {
  if (!started_) return reply(std::string());  // read by the caller as a malformed answer: the node failed
  switch (method) {
    case StorageMethod::kAdd: return server_.add(payload, std::move(reply));
    case StorageMethod::kRead: return server_.read(payload, std::move(reply));
    case StorageMethod::kFence: return server_.fence(payload, std::move(reply));
    case StorageMethod::kDelete: return server_.remove(payload, std::move(reply));
  }
}

std::vector<replication::NodeId> StorageNodeService::live_storage_nodes() {
  std::vector<replication::NodeId> out;
  for (const auto& m : cluster_.members()) {
    if (m.alive || m.id == cluster_.id()) out.push_back(m.id);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void StorageNodeService::call(replication::NodeId node, StorageMethod method, std::string payload, Done done,
                              unsigned timeout_ms) {
  if (node != cluster_.id()) {
    return cluster_.call(node, static_cast<uint16_t>(method), std::move(payload), std::move(done), timeout_ms);
  }
  // This node's own copies: no network hop, the same server, answered on
  // the cluster reactor and never inline.
  runtime::Reactor& r = cluster_.reactor();
  auto task = [this, method, payload = std::move(payload), done = std::move(done), &r]() mutable {
    if (!started_) return done(Status::unavailable("this storage node is stopping"));
    serve(method, payload, [done, &r](std::string answer) {
      r.post_reliably([done, answer = std::move(answer)]() { done(answer); });
    });
  };
  if (!r.post_reliably(std::move(task))) MLOG_DEBUG("storage node: the cluster reactor stopped before a call");
}

}  // namespace magnetar::server
