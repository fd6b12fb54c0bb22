// Which consumer group a Fetch reads for. A Fetch names no group, and
// clients send their group requests on another connection than their
// fetches (librdkafka keeps one to the coordinator), so JoinGroup notes
// each member's (namespace, client id, host), and a fetching connection
// with the same is that group's when exactly one group has such a member.
// Clients that share a client id across groups on one host (librdkafka's
// default "rdkafka") are told apart only on the connection that joined.
//
// Threads: any. The lock is taken by JoinGroup and by a Fetch whose
// connection has not looked since the last change.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace magnetar::protocol::kafka {

class FetchGroups {
 public:
  static constexpr size_t kMaxMembers = 10000;  // past this the notes start over

  void joined(const std::string& ns, const std::string& client_id, const std::string& host,
              const std::string& group) {
    std::lock_guard lock(mu_);
    if (by_member_.size() >= kMaxMembers) by_member_.clear();
    auto [it, fresh] = by_member_.emplace(key(ns, client_id, host), group);
    if (!fresh) {
      if (it->second == group || it->second.empty()) return;
      it->second.clear();  // members of several groups look alike: none is known
    }
    version_.fetch_add(1, std::memory_order_release);
  }
  // The one group of members like this; "" when none or several.
  std::string group_of(const std::string& ns, const std::string& client_id, const std::string& host) const {
    std::lock_guard lock(mu_);
    auto it = by_member_.find(key(ns, client_id, host));
    return it == by_member_.end() ? std::string() : it->second;
  }
  // Bumped by every change: a connection looks again only then.
  uint64_t version() const { return version_.load(std::memory_order_acquire); }

 private:
  // `host` may carry the peer's port ("/127.0.0.1:53211"): each connection
  // has its own, so it is left out.
  static std::string key(const std::string& ns, const std::string& client_id, const std::string& host) {
    const size_t colon = host.rfind(':');
    const bool has_port = colon != std::string::npos && colon + 1 < host.size() && host.back() != ']';
    return ns + '\n' + client_id + '\n' + (has_port ? host.substr(0, colon) : host);
  }

  mutable std::mutex mu_;
  std::unordered_map<std::string, std::string> by_member_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace magnetar::protocol::kafka
