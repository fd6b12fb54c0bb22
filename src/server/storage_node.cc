#include "server/storage_node.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <sstream>
#include <utility>

#include "common/logging.h"
#include "ledger/ledger_ids.h"
#include "cluster/rpc_records.h"
#include "metadata/blocking.h"
#include "replication/replication_generated.h"
#include "runtime/reactor.h"

namespace magnetar::server {

using common::Result;
using common::Status;
using replication::StorageMethod;

StorageNodeService::StorageNodeService(cluster::ClusterNode& cluster, metadata::Store& store, storage::Storage& local,
                                       std::string storage_dir, std::string fence_dir)
    : cluster_(cluster),
      store_(store),
      storage_dir_(std::move(storage_dir)),
      local_(local),
      server_(local, std::move(fence_dir)),
      wiped_below_(common::MetricsRegistry::global().gauge(
          "magnetar_storage_node_wiped_below",
          "Ledgers below this id may have had copies on this node before its storage was wiped or replaced "
          "(0: never wiped); it answers errors, not 'absent', for them")) {}

namespace {

struct Instance {
  std::string id;
  uint64_t wiped_below = 0;
};

std::optional<Instance> parse_instance(const std::string& text) {
  Instance out;
  std::istringstream in(text);
  std::string key;
  while (in >> key) {
    if (key == "instance") in >> out.id;
    if (key == "wiped-below") in >> out.wiped_below;
  }
  if (out.id.empty()) return std::nullopt;
  return out;
}

std::string format_instance(const Instance& i) {
  return "instance " + i.id + "\nwiped-below " + std::to_string(i.wiped_below) + "\n";
}

}  // namespace

Status StorageNodeService::check_instance() {
  const std::string path = storage_dir_ + "/INSTANCE";
  std::optional<Instance> local;
  {
    std::ifstream in(path);
    if (in) local = parse_instance(std::string(std::istreambuf_iterator<char>(in), {}));
  }
  const std::string key = "/storage/nodes/" + std::to_string(cluster_.id());
  auto rec = metadata::blocking::get(store_, key);
  if (!rec.is_ok() && rec.status().code() != common::ErrorCode::kNotFound) return rec.status();
  std::optional<Instance> recorded = rec.is_ok() ? parse_instance(rec->value) : std::nullopt;
  Instance now;
  if (local && (!recorded || recorded->id == local->id)) {
    now = *local;
    if (recorded) now.wiped_below = std::max(now.wiped_below, recorded->wiped_below);
  } else {
    std::random_device rd;
    char id[17];
    std::snprintf(id, sizeof id, "%08x%08x", rd(), rd());
    now.id = id;
    if (recorded) {
      // Wiped or replaced: every ledger handed out so far may have had a copy here.
      auto next = metadata::blocking::get(store_, ledger::LedgerIdAllocator::kNextIdKey);
      uint64_t below = recorded->wiped_below;
      if (next.is_ok()) below = std::max<uint64_t>(below, std::strtoull(next->value.c_str(), nullptr, 10));
      now.wiped_below = below;
      MLOG_ERROR("storage node: {} does not hold instance {} that the cluster knows this member by: its storage "
                 "was wiped or replaced. It starts empty and answers errors, not 'absent', for ledgers below {}",
                 storage_dir_, recorded->id, below);
    }
  }
  // The directory first, synced: a record naming an instance the directory
  // lacks would read as a wipe at the next start.
  const std::string text = format_instance(now);
  const std::string tmp = path + ".tmp";
  {
    std::FILE* f = std::fopen(tmp.c_str(), "w");
    if (f == nullptr) return Status::io_error("cannot write " + tmp);
    const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0 &&
                         ::fsync(fileno(f)) == 0;
    std::fclose(f);
    if (!written || std::rename(tmp.c_str(), path.c_str()) != 0) return Status::io_error("cannot write " + path);
  }
  if (!recorded || recorded->id != now.id || recorded->wiped_below != now.wiped_below) {
    auto put = metadata::blocking::put(store_, key, text);
    if (!put.is_ok()) return put.status();
  }
  server_.set_wiped_below(now.wiped_below);
  wiped_below_.set(static_cast<double>(now.wiped_below));
  return Status::ok();
}

StorageNodeService::~StorageNodeService() { stop(); }

Status StorageNodeService::start() {
  if (started_) return Status::ok();
  MAGNETAR_RETURN_IF_ERROR(check_instance());
  server_.set_self(cluster_.id());
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
  if (!stores_ && method == StorageMethod::kAdd) {
    // No storage role: only copies it held before (a recovery writes to them) take adds.
    const auto* add = cluster::verified_record<replication::fb::AddEntry>(payload);
    if (add != nullptr && !local_.ledger_info(add->ledger()).is_ok()) {
      return reply(replication::encode_outcome(common::Status::failed_precondition(
          "this node has no storage role (--roles): it takes no new ledger copies")));
    }
  }
  switch (method) {
    case StorageMethod::kAdd: return server_.add(payload, std::move(reply));
    case StorageMethod::kRead: return server_.read(payload, std::move(reply));
    case StorageMethod::kFence: return server_.fence(payload, std::move(reply));
    case StorageMethod::kDelete: return server_.remove(payload, std::move(reply));
  }
}

void StorageNodeService::set_roles(const NodeDirectory* directory, bool stores, std::string zone,
                                   std::string group) {
  directory_ = directory;
  stores_ = stores;
  zone_ = std::move(zone);
  group_ = std::move(group);
}

std::string StorageNodeService::group_of(replication::NodeId node) {
  if (node == cluster_.id()) return group_;
  return directory_ != nullptr ? directory_->group_of(node) : std::string();
}

std::string StorageNodeService::zone_of(replication::NodeId node) {
  if (node == cluster_.id()) return zone_;
  return directory_ != nullptr ? directory_->zone_of(node) : std::string();
}

std::vector<replication::NodeId> StorageNodeService::live_storage_nodes() {
  std::vector<replication::NodeId> out;
  for (const auto& m : cluster_.members()) {
    if (m.id == cluster_.id()) {
      if (stores_) out.push_back(m.id);
    } else if (m.alive && (directory_ == nullptr || directory_->stores(m.id))) {
      out.push_back(m.id);
    }
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
