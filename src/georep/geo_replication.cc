#include "georep/geo_replication.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <set>

#include "broker/tracing.h"
#include "client/pulsar_client.h"
#include "runtime/tls_context.h"
#include "common/logging.h"
#include "client/http_client.h"
#include "georep/remote_admin.h"
#include "georep/replicator.h"

namespace magnetar::georep {

using common::Result;
using common::Status;

namespace {

constexpr std::string_view kAttachmentPrefix = "georep:";

// "pulsar://host:port" (or "pulsar+ssl://host:port" when `tls`) -> host,
// port. kInvalidArgument otherwise.
Status split_service_url(const std::string& url, bool tls, std::string* host, std::string* port) {
  const std::string_view scheme = tls ? "pulsar+ssl://" : "pulsar://";
  if (!url.starts_with(scheme)) {
    return Status::invalid_argument("'" + url + "' is not a " + std::string(scheme) + " URL" +
                                    (tls ? "" : " (a pulsar+ssl:// one needs brokerClientTlsEnabled)"));
  }
  std::string rest = url.substr(scheme.size());
  if (auto slash = rest.find('/'); slash != std::string::npos) rest.resize(slash);
  if (auto comma = rest.find(','); comma != std::string::npos) rest.resize(comma);  // the first of several hosts
  auto colon = rest.rfind(':');
  if (colon == std::string::npos) {
    *host = rest;
    *port = tls ? "6651" : "6650";
  } else {
    *host = rest.substr(0, colon);
    *port = rest.substr(colon + 1);
  }
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  if (host->empty() || port->empty()) return Status::invalid_argument("'" + url + "' names no host and port");
  return Status::ok();
}

// A socket connected to host:port within `timeout`, or why not.
Result<int> connect_socket(const std::string& host, const std::string& port, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return Status::unavailable("cannot resolve " + host + ": " + gai_strerror(rc));
  }
  std::string last = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
      if (rc == 1) {
        int err = 0;
        socklen_t len = sizeof(err);
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      } else {
        if (rc == 0) errno = ETIMEDOUT;
        rc = -1;
      }
    }
    if (rc == 0) {
      ::freeaddrinfo(found);
      return fd;
    }
    last = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return Status::unavailable("cannot connect to " + host + ":" + port + ": " + last);
}

}  // namespace

// The token a cluster record's authentication settings give: Pulsar's
// token plugin with "token:<jwt>", "file:///path" (the file's content,
// trimmed) or the token itself; "" without a plugin.
Result<std::string> link_token(const broker::ClusterInfo& info, const std::string& cluster) {
  if (info.authentication_plugin.empty()) return std::string();
  if (info.authentication_plugin.find("AuthenticationToken") == std::string::npos &&
      info.authentication_plugin != "token") {
    return Status::invalid_argument("cluster " + cluster + ": authentication plugin '" + info.authentication_plugin +
                                    "' is not supported for replication (only the token plugin)");
  }
  const std::string& p = info.authentication_parameters;
  std::string token;
  if (p.starts_with("token:")) {
    token = p.substr(6);
  } else if (p.starts_with("file://")) {
    std::ifstream in(p.substr(7));
    if (!in) return Status::invalid_argument("cluster " + cluster + ": cannot read the token file " + p.substr(7));
    std::stringstream content;
    content << in.rdbuf();
    token = content.str();
  } else {
    token = p;
  }
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (token.empty()) return Status::invalid_argument("cluster " + cluster + ": the token plugin has no token");
  return token;
}


GeoReplication::GeoReplication(broker::Tenancy& tenancy, metadata::Store& store, GeoReplicationOptions options)
    : tenancy_(tenancy), store_(store), options_(std::move(options)) {}

GeoReplication::~GeoReplication() { stop(); }

Status GeoReplication::start() {
  worker_ = std::make_unique<runtime::WorkerThread>("georep", 1 << 12);
  config_sync_ = std::make_unique<ConfigSync>(tenancy_, store_, options_.config_sync_interval);
  if (config_leads_) config_sync_->set_leads(config_leads_);
  config_sync_->start();
  return Status::ok();
}

void GeoReplication::stop() {
  stopping_ = true;  // connects still queued give up at once
  if (config_sync_) config_sync_->stop();
  if (worker_) worker_->stop();
}

void GeoReplication::on_policies(broker::Topic& topic, const broker::NamespacePolicies& policies) {
  if (broker::is_trace_topic(topic.name())) return;
  std::set<std::string> remotes;
  // A namespace that does not list this cluster is not replicated from
  // here (a data directory started again under another --cluster-name
  // keeps namespaces that list the old name, whose record names this node).
  if (policies.replication_clusters.count(options_.local_cluster) > 0) {
    for (const auto& c : policies.replication_clusters) {
      if (c != options_.local_cluster) remotes.insert(c);
    }
  }
  // The replicators of clusters no longer listed go, and so do their cursors.
  for (const std::string& key : topic.attachment_keys()) {
    if (!key.starts_with(kAttachmentPrefix)) continue;
    std::string cluster = key.substr(kAttachmentPrefix.size());
    if (remotes.count(cluster) == 0) topic.detach(key);
  }
  for (const std::string& cursor : topic.log().cursor_names()) {
    // A subscription of that name (one made before names were reserved) is left alone.
    if (!broker::is_replicator_name(cursor) || topic.subscription(cursor) != nullptr) continue;
    std::string cluster = cursor.substr(broker::kReplicatorPrefix.size());
    if (remotes.count(cluster) > 0) continue;
    MLOG_INFO("topic {}: no longer replicated to {}; its replication cursor goes", topic.name().to_string(), cluster);
    topic.log().delete_cursor(cursor, [](Status) {});
  }
  for (const std::string& cluster : remotes) {
    std::string key = std::string(kAttachmentPrefix) + cluster;
    if (auto* known = static_cast<Replicator*>(topic.attachment(key))) {
      known->set_sole_remote(remotes.size() == 1);
      continue;
    }
    auto replicator = std::make_unique<Replicator>(topic, cluster, *this);
    Replicator* r = replicator.get();
    r->set_sole_remote(remotes.size() == 1);
    topic.attach(key, std::move(replicator));
    r->start();
  }
}

void GeoReplication::resume(broker::BrokerService& broker) {
  auto task = [this, &broker]() {
    if (stopping_) return;
    size_t loaded = 0;
    auto tenants = tenancy_.list_tenants();
    if (!tenants.is_ok()) {
      MLOG_WARN("geo-replication cannot list tenants to resume: {}", tenants.status().to_string());
      return;
    }
    for (const auto& tenant : *tenants) {
      auto namespaces = tenancy_.list_namespaces(tenant);
      if (!namespaces.is_ok()) continue;
      for (const auto& full : *namespaces) {
        auto ns = broker::NamespaceName::parse(full);
        if (!ns.is_ok()) continue;
        auto policies = tenancy_.get_policies(*ns);
        if (!policies.is_ok()) continue;
        bool remote = false;
        for (const auto& c : policies->replication_clusters) remote = remote || c != options_.local_cluster;
        remote = remote && policies->replication_clusters.count(options_.local_cluster) > 0;
        if (!remote) continue;
        auto topics = tenancy_.list_topics(*ns, broker::TopicDomain::kPersistent);
        if (!topics.is_ok()) continue;
        for (const auto& t : *topics) {
          auto name = broker::TopicName::parse(t);
          if (!name.is_ok()) continue;
          broker.with_existing_topic(*name, true, [](Result<broker::Topic*>) {});
          ++loaded;
        }
      }
    }
    if (loaded > 0) MLOG_INFO("geo-replication: loading {} replicated topics to resume their replicators", loaded);
  };
  Status queued = worker_ ? worker_->post(std::move(task)) : Status::unavailable("geo-replication is not running");
  if (!queued.is_ok()) MLOG_WARN("geo-replication cannot resume: {}", queued.to_string());
}

void GeoReplication::send_acks(const std::string& cluster, const broker::TopicName& topic, std::string body,
                               runtime::Reactor& reactor, std::function<void(Status)> done) {
  const std::string path = "/admin/v2/internal/replicated-subscriptions/persistent/" +
                           client::escape_segment(topic.ns.tenant) + "/" + client::escape_segment(topic.ns.local) +
                           "/" + client::escape_segment(topic.local);
  auto task = [this, cluster, path, body = std::move(body), &reactor, done]() {
    Status st = stopping_ ? Status::unavailable("geo-replication is stopping")
                          : call_remote_admin(tenancy_, cluster, "POST", path, body, options_.connect_timeout);
    if (!reactor.post_reliably([done, st]() { done(st); })) MLOG_DEBUG("geo-replication: a topic's reactor stopped");
  };
  Status queued = worker_ ? worker_->post(std::move(task)) : Status::unavailable("geo-replication is not running");
  if (!queued.is_ok()) done(queued);
}

void GeoReplication::connect(const std::string& cluster, const std::string& topic, runtime::Reactor& reactor,
                             std::function<void(Result<RemoteSocket>)> done) {
  auto task = [this, cluster, topic, &reactor, done]() {
    Result<RemoteSocket> fd = [&]() -> Result<RemoteSocket> {
      if (stopping_) return Status::unavailable("geo-replication is stopping");
      auto info = tenancy_.get_cluster(cluster);
      if (!info.is_ok()) return Status::not_found("cluster " + cluster + ": " + info.status().message());
      const bool tls = info->broker_client_tls_enabled;
      const std::string& url = tls ? info->broker_service_url_tls : info->broker_service_url;
      if (url.empty()) {
        return Status::not_found("cluster " + cluster + " has no " +
                                 (tls ? "brokerServiceUrlTls" : "brokerServiceUrl") + " to replicate to");
      }
      auto token = link_token(*info, cluster);
      if (!token.is_ok()) return token.status();
      std::string host, port;
      Status st = split_service_url(url, tls, &host, &port);
      if (!st.is_ok()) return st;
      std::shared_ptr<const runtime::TlsContext> tls_context;
      if (tls) {
        auto loaded = runtime::TlsContext::load_client(info->broker_client_trust_certs_file, info->tls_allow_insecure,
                                                       info->broker_client_certificate_file,
                                                       info->broker_client_key_file);
        if (!loaded.is_ok()) {
          return Status::invalid_argument("cluster " + cluster + ": " + loaded.status().message());
        }
        tls_context = *loaded;
      }
      // The member that serves the topic: a remote cluster of several
      // members answers for all of them at any one's URL.
      client::ClientOptions lookup;
      lookup.timeout = options_.connect_timeout;
      lookup.token = *token;
      lookup.tls.enabled = tls;
      lookup.tls.trust_certs_file = info->broker_client_trust_certs_file;
      lookup.tls.allow_insecure = info->tls_allow_insecure;
      lookup.tls.cert_file = info->broker_client_certificate_file;
      lookup.tls.key_file = info->broker_client_key_file;
      const std::string scheme = tls ? "pulsar+ssl://" : "pulsar://";
      auto owner = client::PulsarClient::service_url_for(scheme + host + ":" + port, topic, lookup);
      if (!owner.is_ok()) {
        return Status::unavailable("looking up " + topic + " on cluster " + cluster + ": " + owner.status().message());
      }
      std::string owner_host, owner_port;
      st = split_service_url(*owner, tls, &owner_host, &owner_port);
      if (!st.is_ok()) return st;
      auto socket = connect_socket(owner_host, owner_port, options_.connect_timeout);
      // A node that advertises a name this side cannot reach (its host
      // name, say) is tried at its registered address: if it is not the
      // owner, its refusal of the producer says so and the link retries.
      if (!socket.is_ok() && (owner_host != host || owner_port != port)) {
        MLOG_DEBUG("geo-replication: {} (serving {} on cluster {}) cannot be reached: {}; trying {}:{}", *owner, topic,
                   cluster, socket.status().to_string(), host, port);
        socket = connect_socket(host, port, options_.connect_timeout);
        owner_host = host;
      }
      if (!socket.is_ok()) return socket.status();
      return RemoteSocket{*socket, *token, tls_context, owner_host};
    }();
    const int socket = fd.is_ok() ? fd->fd : -1;
    Status posted = reactor.post([done, fd = std::move(fd)]() mutable { done(std::move(fd)); });
    if (!posted.is_ok() && socket >= 0) ::close(socket);
  };
  Status queued = worker_ ? worker_->post(std::move(task)) : Status::unavailable("geo-replication is not running");
  if (!queued.is_ok()) done(queued);
}

}  // namespace magnetar::georep
