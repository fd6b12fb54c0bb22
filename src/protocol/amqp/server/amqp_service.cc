#include "protocol/amqp/server/amqp_service.h"

#include "common/base64.h"

#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/crc32c.h"
#include "common/logging.h"
#include "metadata/blocking.h"
#include "protocol/amqp/convert.h"
#include "protocol/amqp/server/amqp_connection.h"
#include "protocol/amqp/server/forwarding.h"
#include "protocol/amqp/server/remote_consumers.h"

namespace magnetar::protocol::amqp {

using common::Status;
using nlohmann::json;

namespace {

constexpr std::string_view kRoot = "/amqp";

// Percent-encodes everything but [A-Za-z0-9._-], so any AMQP name is one
// metadata key segment ("" becomes "%").
std::string escape(std::string_view name) {
  if (name.empty()) return "%";
  std::string out;
  for (unsigned char c : name) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
        c == '-') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

// escape()'s inverse.
std::string unescape(std::string_view s) {
  if (s == "%") return {};
  std::string out;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '%' && k + 2 < s.size()) {
      auto hex = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
      out += static_cast<char>(hex(s[k + 1]) * 16 + hex(s[k + 2]));
      k += 2;
    } else {
      out += s[k];
    }
  }
  return out;
}

std::string encode_table(const FieldTable& t) {
  WireWriter w;
  w.table(t);
  return w.finish().to_string();
}

FieldTable decode_table(const std::string& b64) {
  auto raw = common::base64_decode(b64);
  if (!raw.is_ok() || raw->empty()) return {};
  WireReader r(common::Slice::copy_of(*raw));
  FieldTable t = r.table();
  return r.ok() ? t : FieldTable{};
}

std::string vhost_key(const broker::NamespaceName& ns) {
  return fmt::format("{}/{}/{}", kRoot, ns.tenant, ns.local);
}

std::string binding_id(const Binding& b) {
  return fmt::format("{},{},{},{},{:08x}", escape(b.source), b.to_exchange ? 'e' : 'q', escape(b.destination),
                     escape(b.routing_key), common::crc32c::value(encode_table(b.arguments)));
}

// A topology record's fields, as load and sync read them (Persist writes them).
ExchangeDef exchange_from_record(const std::string& name, const json& j) {
  ExchangeDef e;
  e.name = name;
  auto type = parse_exchange_type(j.value("type", "direct"));
  e.type = type ? *type : ExchangeType::kDirect;
  e.durable = true;
  e.auto_delete = j.value("auto_delete", false);
  e.internal = j.value("internal", false);
  e.arguments = decode_table(j.value("arguments", ""));
  return e;
}

QueueDef queue_from_record(const std::string& name, const json& j) {
  QueueDef q;
  q.name = name;
  q.durable = j.value("durable", true);
  q.exclusive = j.value("exclusive", false);
  q.auto_delete = j.value("auto_delete", false);
  q.arguments = decode_table(j.value("arguments", ""));
  auto parsed = parse_queue_arguments(q.arguments);
  if (parsed) q.parsed = *parsed;
  q.last_used_ms = common::wall_clock_ms();
  return q;
}

Binding binding_from_record(const json& j) {
  Binding b;
  b.source = j.value("source", "");
  b.to_exchange = j.value("to_exchange", false);
  b.destination = j.value("destination", "");
  b.routing_key = j.value("routing_key", "");
  b.arguments = decode_table(j.value("arguments", ""));
  return b;
}

bool same_exchange(const ExchangeDef& a, const ExchangeDef& b) {
  return a.type == b.type && a.durable == b.durable && a.auto_delete == b.auto_delete && a.internal == b.internal &&
         a.arguments == b.arguments;
}

}  // namespace

AmqpMetrics& AmqpMetrics::get() {
  static AmqpMetrics metrics = [] {
    auto& reg = common::MetricsRegistry::global();
    return AmqpMetrics{
        reg.gauge("magnetar_amqp_connections", "AMQP connections open"),
        reg.gauge("magnetar_amqp_channels", "AMQP channels open"),
        reg.counter("magnetar_amqp_messages_published_total", "Messages published over AMQP and routed to a queue"),
        reg.counter("magnetar_amqp_messages_delivered_total", "Messages delivered over AMQP (basic.deliver, basic.get-ok)"),
        reg.counter("magnetar_amqp_messages_dead_lettered_total", "Messages dead-lettered (rejected, expired, over length)"),
        reg.counter("magnetar_amqp_chunks_skipped_total",
                    "Entries holding one chunk of a chunked Pulsar message, settled without delivery (AMQP delivers "
                    "whole messages only)"),
        reg.counter("magnetar_amqp_entries_undeliverable_total",
                    "Stored entries an AMQP consumer could not be given (not convertible), acknowledged and skipped"),
        reg.counter("magnetar_amqp_dead_letter_failures_total",
                    "Dead-lettered copies that could not be stored (the original is settled all the same)"),
        reg.counter("magnetar_amqp_unconfirmed_publish_failures_total",
                    "Publishes on channels without confirms that could not be stored"),
        reg.counter("magnetar_amqp_overflow_rejected_total",
                    "Messages a queue at its x-max-length or x-max-length-bytes refused (x-overflow reject-publish)"),
        reg.counter("magnetar_amqp_forwarded_publishes_out_total",
                    "Messages published here with copies for queues another cluster member owns, sent there"),
        reg.counter("magnetar_amqp_forwarded_publishes_in_total",
                    "Messages another cluster member sent here for queues this member owns"),
    };
  }();
  return metrics;
}

void AmqpMetrics::error(uint16_t code) {
  common::MetricsRegistry::global()
      .counter("magnetar_amqp_errors_total", "AMQP channel and connection exceptions raised, by reply code",
               {{"code", std::to_string(code)}})
      .inc();
}

AmqpService::AmqpService(runtime::Runtime& runtime, broker::BrokerService& broker, metadata::Store& store,
                         AmqpServiceOptions options)
    : runtime_(runtime), broker_(broker), store_(store), options_(std::move(options)), keeper_(*this, runtime) {
  dead_letter_producer_id_ = next_id();
  forwarded_producer_id_ = next_id();
  dead_letter_producer_ = fmt::format("amqp-dead-letter-{}", options_.cluster_name);
}

AmqpService::~AmqpService() {
  std::unique_lock life(sync_->life);
  sync_->alive = false;
}

Status AmqpService::start() {
  MAGNETAR_RETURN_IF_ERROR(load_topology());
  follow_topology();
  if (broker::RemoteCalls* calls = broker_.remote_calls()) {
    serve_cluster_calls(*this, *calls);
    if (broker_.ownership() != nullptr && node_ != 0) {
      remote_consumers_ = std::make_shared<RemoteConsumers>(*this, runtime_, *calls, *broker_.ownership(), node_);
      remote_consumers_->start();
    }
  }
  runtime::ConnectionOptions conn;
  conn.max_input_bytes = size_t{options_.frame_max} * 4 + 4096;
  runtime::ListenerPorts ports{options_.plain_enabled, options_.port, options_.tls, options_.tls_port};
  MAGNETAR_RETURN_IF_ERROR(runtime::listen_plain_and_tls(
      runtime_, "amqp", options_.bind, ports,
      [this](runtime::Reactor& reactor) { return std::make_unique<AmqpConnection>(reactor, *this); },
      conn, &listener_, &tls_listener_));
  keeper_.changed();
  return Status::ok();
}

void AmqpService::stop() {
  stopping_.store(true, std::memory_order_release);
  if (watch_) store_.unwatch(*watch_);
  watch_.reset();
  if (remote_consumers_) remote_consumers_->stop();
  if (listener_) listener_->shutdown();
  if (tls_listener_) tls_listener_->shutdown();
  keeper_.stop();
}

std::vector<AmqpService::LimitedQueue> AmqpService::limited_queues() const {
  std::shared_lock lock(mu_);
  std::vector<LimitedQueue> out;
  for (const auto& [name, topology] : vhosts_) {
    auto ns = broker::NamespaceName::parse(name);
    if (!ns) continue;
    for (const auto& [queue, def] : topology.queues()) {
      QueueRef ref{*ns, queue, def.parsed, def.auto_delete};
      if (ref.limited()) out.push_back({std::move(ref), def.last_used_ms});
    }
  }
  return out;
}

bool AmqpService::has_limited_queues() const {
  std::shared_lock lock(mu_);
  for (const auto& [name, topology] : vhosts_) {
    for (const auto& [queue, def] : topology.queues()) {
      if (has_limits(def.parsed)) return true;
    }
  }
  return false;
}

void AmqpService::touch(const broker::NamespaceName& ns, const std::string& name) {
  std::unique_lock lock(mu_);
  if (QueueDef* q = topology_locked(ns).mutable_queue(name)) q->last_used_ms = common::wall_clock_ms();
}

common::Result<broker::NamespaceName> AmqpService::namespace_of(std::string_view vhost) {
  if (vhost.empty() || vhost == "/") return broker::NamespaceName::of("public", "default");
  auto ns = broker::NamespaceName::parse(vhost);
  if (!ns) return Status::not_found(fmt::format("vhost '{}' is not a tenant/namespace", vhost));
  return ns;
}

common::Result<broker::TopicName> AmqpService::queue_topic(const broker::NamespaceName& ns, const std::string& queue,
                                                         uint8_t level) {
  if (level == 0) return broker::TopicName::of(broker::TopicDomain::kPersistent, ns.tenant, ns.local, queue);
  return broker::TopicName::of(broker::TopicDomain::kPersistent, ns.tenant, ns.local,
                               fmt::format("{}-__priority-{}", queue, level));
}

std::vector<broker::TopicName> AmqpService::routed_topics(const Topology& t, const broker::NamespaceName& ns,
                                                          const std::vector<std::string>& queues,
                                                          std::optional<uint8_t> priority) {
  std::vector<broker::TopicName> topics;
  topics.reserve(queues.size());
  for (const std::string& name : queues) {
    const QueueDef* q = t.queue(name);
    // Queue names were checked when declared.
    if (auto topic = queue_topic(ns, name, q != nullptr ? q->parsed.level_of(priority) : 0)) {
      topics.push_back(*topic);
    }
  }
  return topics;
}

std::vector<broker::TopicName> AmqpService::queue_topics(const broker::NamespaceName& ns, const std::string& queue,
                                                         const QueueArguments& args) {
  std::vector<broker::TopicName> topics;
  for (unsigned level = 0; level <= args.max_priority; ++level) {
    if (auto topic = queue_topic(ns, queue, static_cast<uint8_t>(level))) topics.push_back(*topic);
  }
  return topics;
}

Topology& AmqpService::topology_locked(const broker::NamespaceName& ns) { return vhosts_[ns.to_string()]; }

const Topology& AmqpService::find_locked(const broker::NamespaceName& ns) const {
  auto it = vhosts_.find(ns.to_string());
  return it == vhosts_.end() ? empty_ : it->second;
}

void AmqpService::put(std::string key, std::string value, std::function<void(Status)> done) {
  write_started(key);
  store_.put(key, std::move(value), {}, [this, sync = sync_, key, done = std::move(done)](
                                             common::Result<metadata::Stat> r) {
    if (!r.is_ok()) MLOG_WARN("amqp: a topology write failed: {}", r.status().to_string());
    std::shared_lock life(sync->life);
    if (sync->alive) write_finished(key);
    if (done) done(r.is_ok() ? Status::ok() : r.status());
  });
}

void AmqpService::del(std::string key) {
  write_started(key);
  store_.del(key, metadata::kAnyVersion, [this, sync = sync_, key](Status st) {
    if (!st.is_ok() && st.code() != common::ErrorCode::kNotFound) {
      MLOG_WARN("amqp: a topology delete failed: {}", st.to_string());
    }
    std::shared_lock life(sync->life);
    if (sync->alive) write_finished(key);
  });
}

void AmqpService::Persist::save_exchange(const ExchangeDef& e, std::function<void(Status)> done) {
  json j = {{"type", exchange_type_name(e.type)},
            {"auto_delete", e.auto_delete},
            {"internal", e.internal},
            {"arguments", common::base64_encode(encode_table(e.arguments))}};
  service_.put(fmt::format("{}/exchanges/{}", vhost_key(ns_), escape(e.name)), j.dump(), std::move(done));
}

void AmqpService::Persist::forget_exchange(const std::string& name) {
  service_.del(fmt::format("{}/exchanges/{}", vhost_key(ns_), escape(name)));
}

void AmqpService::Persist::save_queue(const QueueDef& q, std::function<void(Status)> done) {
  json j = {{"durable", q.durable && !q.exclusive},
            {"exclusive", q.exclusive},
            {"auto_delete", q.auto_delete},
            {"arguments", common::base64_encode(encode_table(q.arguments))},
            {"node", service_.node_}};
  service_.put(fmt::format("{}/queues/{}", vhost_key(ns_), escape(q.name)), j.dump(), std::move(done));
}

void AmqpService::Persist::forget_queue(const std::string& name) {
  service_.del(fmt::format("{}/queues/{}", vhost_key(ns_), escape(name)));
}

void AmqpService::Persist::save_binding(const Binding& b, std::function<void(Status)> done) {
  json j = {{"source", b.source},
            {"to_exchange", b.to_exchange},
            {"destination", b.destination},
            {"routing_key", b.routing_key},
            {"arguments", common::base64_encode(encode_table(b.arguments))}};
  service_.put(fmt::format("{}/bindings/{}", vhost_key(ns_), binding_id(b)), j.dump(), std::move(done));
}

void AmqpService::Persist::forget_binding(const Binding& b) {
  service_.del(fmt::format("{}/bindings/{}", vhost_key(ns_), binding_id(b)));
}

// Topology sync between cluster members. Each member changes its own
// topology first and writes the records after; the others follow the
// records: every change of one under /amqp/<tenant>/<namespace>/ is read
// and applied to that vhost's topology, a record at a time, in the order
// the changes were made (a change that a later one of the same record
// overtook is dropped: the later one decides). A member ignores changes of
// records it is writing itself (its topology is ahead of the store there).
// Runtime state (consumer counts, x-expires use) stays as it is.

void AmqpService::write_started(const std::string& key) {
  if (node_ == 0) return;
  std::lock_guard lock(sync_->mu);
  ++sync_->writes_under_way[key];
}

void AmqpService::write_finished(const std::string& key) {
  if (node_ == 0) return;
  std::lock_guard lock(sync_->mu);
  auto it = sync_->writes_under_way.find(key);
  if (it != sync_->writes_under_way.end() && --it->second == 0) sync_->writes_under_way.erase(it);
}

void AmqpService::follow_topology() {
  if (node_ == 0) return;
  auto id = store_.watch(std::string(kRoot) + "/", [this, sync = sync_](const metadata::Event& e) {
    std::shared_lock life(sync->life);
    if (sync->alive) record_changed(e.key, e.type == metadata::EventType::kDeleted);
  });
  if (id.is_ok()) {
    watch_ = *id;
  } else {
    MLOG_WARN("amqp: cannot follow other members' topology: {}", id.status().to_string());
  }
}

void AmqpService::record_changed(const std::string& key, bool deleted) {
  if (stopping()) return;
  // /amqp/<tenant>/<namespace>/<kind>/<record>
  std::vector<std::string_view> parts;
  std::string_view rest(key);
  rest.remove_prefix(std::min(rest.size(), kRoot.size() + 1));
  for (size_t at = rest.find('/'); at != std::string_view::npos; at = rest.find('/')) {
    parts.push_back(rest.substr(0, at));
    rest.remove_prefix(at + 1);
  }
  parts.push_back(rest);
  if (parts.size() != 4) return;
  auto ns = broker::NamespaceName::of(std::string(parts[0]), std::string(parts[1]));
  if (!ns) return;
  RecordChange change{*ns, std::string(parts[2]), std::string(parts[3]), key, 0};
  {
    std::lock_guard lock(sync_->mu);
    if (sync_->writes_under_way.count(key)) return;
    change.seq = ++sync_->changes[key];
  }
  if (deleted) return apply_record(change, nullptr);
  store_.get(key, [this, sync = sync_, change](common::Result<metadata::Record> r) {
    std::shared_lock life(sync->life);
    if (!sync->alive) return;
    if (r.is_ok()) {
      json j = json::parse(r->value, nullptr, false);
      if (!j.is_discarded() && j.is_object()) return apply_record(change, &j);
      MLOG_WARN("amqp: skipping unreadable topology record {}", change.key);
    } else if (r.status().code() == common::ErrorCode::kNotFound) {
      return apply_record(change, nullptr);  // deleted again meanwhile
    } else {
      MLOG_WARN("amqp: cannot read topology record {} to follow it: {}", change.key, r.status().to_string());
    }
    std::lock_guard lock(sync->mu);
    auto it = sync->changes.find(change.key);
    if (it != sync->changes.end() && it->second == change.seq) sync->changes.erase(it);
  });
}

void AmqpService::apply_record(const RecordChange& change, const json* record) {
  std::unique_lock topology(mu_);
  {
    std::lock_guard lock(sync_->mu);
    auto it = sync_->changes.find(change.key);
    if (it == sync_->changes.end() || it->second != change.seq) return;  // a later change decides
    sync_->changes.erase(it);
    if (sync_->writes_under_way.count(change.key)) return;
  }
  Topology& t = topology_locked(change.ns);
  const std::string name = unescape(change.record);
  if (change.kind == "exchanges") {
    const ExchangeDef* have = t.exchange(name);
    if (have != nullptr && have->builtin) return;
    if (record != nullptr) {
      ExchangeDef e = exchange_from_record(name, *record);
      if (have == nullptr || !same_exchange(*have, e)) t.put_exchange(std::move(e));
    } else if (have != nullptr && have->durable) {
      t.remove_exchange(name);
    }
  } else if (change.kind == "queues") {
    QueueDef* have = t.mutable_queue(name);
    if (record == nullptr) {
      if (have != nullptr) t.remove_queue(name);
      return;
    }
    QueueDef q = queue_from_record(name, *record);
    if (have == nullptr) {
      if (q.exclusive) q.owner = kElsewhere;
      t.put_queue(std::move(q));
    } else if (have->arguments != q.arguments || have->auto_delete != q.auto_delete) {
      have->arguments = std::move(q.arguments);
      have->parsed = q.parsed;
      have->auto_delete = q.auto_delete;
    }
  } else if (change.kind == "bindings") {
    if (record != nullptr) {
      t.add_binding(binding_from_record(*record));
      return;
    }
    for (const Binding& b : t.bindings()) {
      if (binding_id(b) != change.record) continue;
      Binding gone = b;
      t.remove_binding(gone);
      return;
    }
  }
}

Status AmqpService::load_topology() {
  namespace blocking = metadata::blocking;
  auto tenants = blocking::list_children(store_, std::string(kRoot));
  if (!tenants) return tenants.status();
  size_t exchanges = 0, queues = 0, bindings = 0;
  std::vector<std::tuple<broker::NamespaceName, std::string, QueueArguments>> transient;
  for (const auto& tenant : *tenants) {
    auto namespaces = blocking::list_children(store_, fmt::format("{}/{}", kRoot, tenant));
    if (!namespaces) return namespaces.status();
    for (const auto& local : *namespaces) {
      auto ns = broker::NamespaceName::of(tenant, local);
      if (!ns) continue;
      Topology& t = vhosts_[ns->to_string()];
      const std::string base = vhost_key(*ns);
      // Reads every record of one kind; one that does not parse is skipped
      // with a log line rather than failing the start.
      auto each = [&](std::string_view kind, const std::function<void(const std::string&, const json&)>& fn) {
        auto names = blocking::list_children(store_, fmt::format("{}/{}", base, kind));
        if (!names) return names.status();
        for (const auto& n : *names) {
          auto rec = blocking::get(store_, fmt::format("{}/{}/{}", base, kind, n));
          if (!rec) continue;
          json j = json::parse(rec->value, nullptr, false);
          if (j.is_discarded() || !j.is_object()) {
            MLOG_WARN("amqp: skipping unreadable {} record {}", kind, n);
            continue;
          }
          fn(unescape(n), j);
        }
        return Status::ok();
      };
      MAGNETAR_RETURN_IF_ERROR(each("exchanges", [&](const std::string& name, const json& j) {
        t.put_exchange(exchange_from_record(name, j));
        ++exchanges;
      }));
      MAGNETAR_RETURN_IF_ERROR(each("queues", [&](const std::string& name, const json& j) {
        QueueDef q = queue_from_record(name, j);
        // A cluster member's transient queues are its own to delete; the
        // other members' are in use there.
        if (!q.durable && j.value("node", uint64_t{0}) == node_) {
          transient.emplace_back(*ns, name, q.parsed);
          return;
        }
        if (q.exclusive) q.owner = kElsewhere;
        t.put_queue(std::move(q));
        ++queues;
      }));
      MAGNETAR_RETURN_IF_ERROR(each("bindings", [&](const std::string&, const json& j) {
        t.add_binding(binding_from_record(j));
        ++bindings;
      }));
    }
  }
  if (exchanges + queues + bindings > 0) {
    MLOG_INFO("amqp: {} durable exchanges, {} queues and {} bindings restored", exchanges, queues, bindings);
  }
  // Transient queues did not outlive the process that had them: their
  // records and topics go (the topics in the background).
  for (const auto& [ns, name, args] : transient) {
    (void)blocking::del(store_, fmt::format("{}/queues/{}", vhost_key(ns), escape(name)));
    for (const auto& topic : queue_topics(ns, name, args)) {
      broker_.with_topic(topic, [this, topic](common::Result<broker::Topic*> t) {
        if (t.is_ok()) broker_.delete_topic(topic, true, [](Status) {});
      });
    }
  }
  if (!transient.empty()) MLOG_INFO("amqp: {} transient queues of the last run deleted", transient.size());
  return Status::ok();
}

}  // namespace magnetar::protocol::amqp
