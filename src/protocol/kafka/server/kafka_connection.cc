#include "protocol/kafka/server/kafka_connection.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/clock.h"
#include "common/logging.h"
#include "common/metrics.h"

namespace magnetar::protocol::kafka {

using common::Slice;
using common::Status;

namespace {

common::Counter& pauses_metric() {
  static common::Counter& pauses = common::MetricsRegistry::global().counter(
      "magnetar_kafka_connection_pauses_total",
      "Times a Kafka connection stopped reading because its requests awaiting responses reached their bound");
  return pauses;
}

// How often a connection with Produce requests waiting looks at the lease.
constexpr auto kLeaseWatch = std::chrono::seconds(1);

}  // namespace

KafkaConnection::KafkaConnection(runtime::Reactor& reactor, KafkaService& service)
    : reactor_(reactor),
      service_(service),
      link_(std::make_shared<KafkaLink>(KafkaLink{this})),
      throttle_(reactor,
                [this]() {
                  if (conn_ == nullptr) return;
                  update_reading();
                  if (input_ != nullptr) on_data(*conn_, *input_);
                }),
      window_(std::max<size_t>(1, service.options().max_inflight_requests),
              std::max<size_t>(1, service.options().max_inflight_bytes)) {}

KafkaConnection::~KafkaConnection() { link_->conn = nullptr; }

// Its own bytes; for a Fetch the most its response may carry (MaxBytes;
// Kafka lets it pass that by one batch); for a Metadata request as much as
// the largest Metadata response so far, or before the first (whose size
// nothing tells) the whole bytes bound.
size_t KafkaConnection::window_charge(const Request& request, size_t bytes) const {
  switch (request.header.api_key) {
    case kFetch: return std::max(bytes, static_cast<size_t>(std::max<int64_t>(0, request.body.i("MaxBytes"))));
    case kMetadata:
      return std::max(bytes, metadata_response_bytes_ > 0 ? metadata_response_bytes_ : window_.max_bytes());
    default: return bytes;
  }
}

void KafkaConnection::on_data(runtime::Connection& conn, common::SliceChain& input) {
  if (conn_ == nullptr) connected_since_ms_ = common::wall_clock_ms();
  conn_ = &conn;
  input_ = &input;
  while (!conn.closing() && conn.writable() && !throttle_.holding() && window_.open() &&
         input.size() >= kSizePrefixBytes) {
    uint8_t prefix[kSizePrefixBytes];
    input.copy_out(prefix, sizeof prefix);
    int32_t size = static_cast<int32_t>((uint32_t{prefix[0]} << 24) | (uint32_t{prefix[1]} << 16) |
                                        (uint32_t{prefix[2]} << 8) | prefix[3]);
    if ((size < 8 && !(raw_sasl_next_ && size >= 0)) || static_cast<size_t>(size) > service_.options().max_request_bytes) {
      MLOG_INFO("kafka client {}: request size {} out of range; closing", conn.peer(), size);
      close(Status::invalid_argument(fmt::format("request size {} out of range", size)));
      return;
    }
    if (input.size() < kSizePrefixBytes + static_cast<size_t>(size)) return;
    input.consume(kSizePrefixBytes);
    if (raw_sasl_next_) {
      // After a v0 SaslHandshake the client sends its SASL token bare.
      raw_sasl_next_ = false;
      handle_raw_sasl_token(*this, input.take_front(static_cast<size_t>(size)));
      continue;
    }
    handle_request(input.take_front(static_cast<size_t>(size)));
  }
}

void KafkaConnection::handle_request(Slice message) {
  const size_t bytes = kSizePrefixBytes + message.size();
  WireReader in(std::move(message));
  Request request;
  request.header = peek_request_header(in);
  request.api = find_api(request.header.api_key);
  if (request.api == nullptr) {
    // As Kafka's own broker does: a key we do not know has no response
    // layout to answer in, and a client only sends keys ApiVersions listed.
    MLOG_INFO("kafka client {}: API key {} is not served; closing", conn_->peer(), request.header.api_key);
    close(Status::unimplemented(fmt::format("API key {} is not served", request.header.api_key)));
    return;
  }
  if (!request.api->serves(request.version())) {
    if (request.header.api_key == kApiVersions) {
      request.slot = open_slot(bytes);
      read_request_header_rest(in, &request.header, 1);
      answer_unsupported_api_versions(*this, request);
      return;
    }
    MLOG_INFO("kafka client {}: {} v{} is not served; closing", conn_->peer(), request.api->name, request.version());
    close(Status::unimplemented(fmt::format("{} v{} is not served", request.api->name, request.version())));
    return;
  }
  const int16_t v = request.version();
  read_request_header_rest(in, &request.header, request.api->request_header_version(v));
  request.body = decode_struct(in, *request.api->request, v, request.api->flexible(v));
  if (!in.ok()) {
    MLOG_INFO("kafka client {}: malformed {} v{} request: {}; closing", conn_->peer(), request.api->name, v,
              in.status().message());
    close(in.status());
    return;
  }
  request.slot = open_slot(window_charge(request, bytes));
  dispatch(request);
}

void KafkaConnection::dispatch(Request& request) {
  const int16_t key = request.header.api_key;
  if (service_.sasl_required() && !authenticated_ && conn_ != nullptr && conn_->tls()) {
    // Kafka's SSL principal: a verified client certificate authenticates
    // the connection with its CN as the role (SASL may still replace it).
    if (std::string cn = conn_->tls_peer_common_name(); !cn.empty()) authenticated(std::move(cn), std::nullopt);
  }
  if (service_.sasl_required() && !authenticated_ && key != kApiVersions && key != kSaslHandshake &&
      key != kSaslAuthenticate) {
    // As Kafka's broker does: nothing but the handshake before SASL.
    MLOG_INFO("kafka client {}: {} before SASL authentication; closing", conn_->peer(), request.api->name);
    close(Status::permission_denied(fmt::format("{} before SASL authentication", request.api->name)));
    return;
  }
  if (!tenant_slot_ && key != kApiVersions && key != kSaslHandshake && key != kSaslAuthenticate) {
    // As Kafka's broker at max.connections: a connection over the tenant's
    // limit is closed.
    auto slot = service_.broker().take_connection_slot(ns().tenant);
    if (!slot.is_ok()) {
      MLOG_INFO("kafka client {}: {}; closing", conn_->peer(), slot.status().message());
      close(slot.status());
      return;
    }
    tenant_slot_ = std::move(slot).value();
  }
  switch (key) {
    case kApiVersions: return handle_api_versions(*this, request);
    case kMetadata: return handle_metadata(*this, request);
    case kProduce: return handle_produce(*this, request);
    case kFetch: return handle_fetch(*this, request);
    case kListOffsets: return handle_list_offsets(*this, request);
    case kFindCoordinator: return handle_find_coordinator(*this, request);
    case kJoinGroup: return on_group_coordinator(*this, request, handle_join_group);
    case kSyncGroup: return on_group_coordinator(*this, request, handle_sync_group);
    case kHeartbeat: return on_group_coordinator(*this, request, handle_heartbeat);
    case kLeaveGroup: return on_group_coordinator(*this, request, handle_leave_group);
    case kOffsetCommit: return handle_offset_commit(*this, request);
    case kOffsetFetch: return handle_offset_fetch(*this, request);
    case kListGroups: return handle_list_groups(*this, request);
    case kDescribeGroups: return handle_describe_groups(*this, request);
    case kDeleteGroups: return handle_delete_groups(*this, request);
    case kCreateTopics: return handle_create_topics(*this, request);
    case kDeleteTopics: return handle_delete_topics(*this, request);
    case kCreatePartitions: return handle_create_partitions(*this, request);
    case kDescribeConfigs: return handle_describe_configs(*this, request);
    case kInitProducerId: return handle_init_producer_id(*this, request);
    case kSaslHandshake: return handle_sasl_handshake(*this, request);
    case kSaslAuthenticate: return handle_sasl_authenticate(*this, request);
    case kDescribeCluster: return handle_describe_cluster(*this, request);
    case kAlterConfigs: return handle_alter_configs(*this, request);
    case kIncrementalAlterConfigs: return handle_incremental_alter_configs(*this, request);
    case kDeleteRecords: return handle_delete_records(*this, request);
    case kOffsetDelete: return on_group_coordinator(*this, request, handle_offset_delete);
    case kOffsetForLeaderEpoch: return handle_offset_for_leader_epoch(*this, request);
    case kDescribeLogDirs: return handle_describe_log_dirs(*this, request);
    case kDescribeProducers: return handle_describe_producers(*this, request);
    case kDescribeUserScramCredentials: return handle_describe_user_scram_credentials(*this, request);
    case kAlterUserScramCredentials: return handle_alter_user_scram_credentials(*this, request);
    default: return respond_none(request);
  }
}

void KafkaConnection::respond(const Request& request, const Struct& response) {
  const int16_t v = request.version();
  WireWriter out(512);
  begin_response(out, request.header.correlation_id, request.api->response_header_version(v));
  encode_struct(out, response, v, request.api->flexible(v));
  Slice bytes = finish_response(out);
  if (request.header.api_key == kMetadata) metadata_response_bytes_ = std::max(metadata_response_bytes_, bytes.size());
  for (Slot& slot : pending_) {
    if (slot.id != request.slot) continue;
    // A response that waits behind an earlier one counts what it holds.
    if (slot.id != pending_.front().id && bytes.size() > slot.bytes) {
      if (window_.add_bytes(bytes.size() - slot.bytes)) {
        pauses_metric().inc();
        update_reading();
      }
      slot.bytes = bytes.size();
    }
    slot.response = std::move(bytes);
    break;
  }
  flush();
}

void KafkaConnection::respond_none(const Request& request) {
  for (Slot& slot : pending_) {
    if (slot.id == request.slot) {
      slot.response = Slice();
      break;
    }
  }
  flush();
}

void KafkaConnection::respond_raw(Slice bytes) {
  open_slot(0);
  pending_.back().response = std::move(bytes);
  flush();
}

uint64_t KafkaConnection::open_slot(size_t bytes) {
  const uint64_t id = next_slot_++;
  pending_.push_back(Slot{id, bytes, std::nullopt});
  if (window_.add(bytes)) {
    pauses_metric().inc();
    update_reading();
  }
  return id;
}

void KafkaConnection::flush() {
  bool reopened = false;
  while (!pending_.empty() && pending_.front().response.has_value()) {
    Slot slot = std::move(pending_.front());
    pending_.pop_front();
    reopened = window_.remove(slot.bytes) || reopened;
    if (conn_ != nullptr && !slot.response->empty()) conn_->write(std::move(*slot.response));
  }
  if (reopened) {
    update_reading();
    schedule_decode();
  }
}

void KafkaConnection::update_reading() {
  if (conn_ == nullptr) return;
  if (throttle_.holding() || !window_.open()) {
    conn_->pause_reading();
  } else {
    conn_->resume_reading();
  }
}

void KafkaConnection::schedule_decode() {
  if (input_ == nullptr || input_->empty()) return;
  reactor_.defer([link = std::weak_ptr<KafkaLink>(link_)]() {
    auto l = link.lock();
    if (!l || l->conn == nullptr) return;
    KafkaConnection& c = *l->conn;
    if (c.conn_ != nullptr && c.input_ != nullptr) c.on_data(*c.conn_, *c.input_);
  });
}

void KafkaConnection::set_fetch_group(const std::string& group, const RequestHeader& header) {
  if (!joined_here_ || fetch_group_ != group) {
    service_.fetch_groups().joined(ns().to_string(), header.client_id.value_or(""), peer_host(), group);
  }
  fetch_group_ = group;
  joined_here_ = true;
}

const std::string& KafkaConnection::fetch_group(const RequestHeader& header) {
  if (joined_here_) return fetch_group_;
  const uint64_t version = service_.fetch_groups().version();
  if (version != fetch_groups_seen_) {
    fetch_groups_seen_ = version;
    fetch_group_ = service_.fetch_groups().group_of(ns().to_string(), header.client_id.value_or(""), peer_host());
  }
  return fetch_group_;
}

void KafkaConnection::park_fetch(std::chrono::steady_clock::time_point deadline, std::function<void()> retry) {
  parked_.emplace_back(deadline, std::move(retry));
  arm_timer();
}

void KafkaConnection::wake_fetches() {
  ++wakes_;
  auto due = std::move(parked_);
  parked_.clear();
  for (auto& [deadline, fn] : due) fn();
  arm_timer();
}

uint64_t KafkaConnection::at(std::chrono::steady_clock::time_point deadline, std::function<void()> fn) {
  const uint64_t id = ++deadline_ids_;
  deadlines_.push_back({deadline, id, std::move(fn)});
  arm_timer();
  return id;
}

void KafkaConnection::cancel(uint64_t deadline_id) {
  auto it = std::find_if(deadlines_.begin(), deadlines_.end(), [&](const Deadline& d) { return d.id == deadline_id; });
  if (it == deadlines_.end()) return;
  deadlines_.erase(it);
  arm_timer();
}

void KafkaConnection::on_deadline() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::function<void()>> due;
  for (auto it = parked_.begin(); it != parked_.end();) {
    if (it->first <= now) {
      due.push_back(std::move(it->second));
      it = parked_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = deadlines_.begin(); it != deadlines_.end();) {
    if (it->at <= now) {
      due.push_back(std::move(it->fn));
      it = deadlines_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& fn : due) fn();
  arm_timer();
}

// One timer, set to the earliest deadline of a parked Fetch or of at().
void KafkaConnection::arm_timer() {
  if (parked_.empty() && deadlines_.empty()) {
    if (timer_) timer_->cancel();
    return;
  }
  auto earliest = std::chrono::steady_clock::time_point::max();
  for (const auto& [deadline, fn] : parked_) earliest = std::min(earliest, deadline);
  for (const Deadline& d : deadlines_) earliest = std::min(earliest, d.at);
  if (!timer_) timer_ = std::make_unique<runtime::Timer>(reactor_);
  auto wait = std::chrono::ceil<std::chrono::milliseconds>(earliest - std::chrono::steady_clock::now());
  timer_->once(std::max(wait, std::chrono::milliseconds(0)), [this]() { on_deadline(); });
}

std::pair<uint64_t, std::string> KafkaConnection::producer_for(const std::string& topic, int32_t partition) {
  auto [it, added] = producers_.try_emplace(fmt::format("{}/{}", topic, partition));
  if (added) {
    uint64_t id = service_.next_id();
    it->second = {id, fmt::format("kafka-{}-{}", service_.options().cluster_id, id)};
  }
  return it->second;
}

common::Status KafkaConnection::authorize(const std::string& topic, broker::TopicAction action) const {
  if (!service_.authorizes()) return common::Status::ok();
  auto name = topic_for(topic);
  if (!name.is_ok()) return name.status();
  return service_.authorization().check(role_, *name, action);
}

std::string KafkaConnection::group_key(const std::string& group) const {
  return group.empty() ? group : ns().to_string() + "/" + group;
}

std::optional<std::string> KafkaConnection::group_name(const std::string& key) const {
  std::string prefix = ns().to_string() + "/";
  if (key.size() <= prefix.size() || key.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  return key.substr(prefix.size());
}

common::Status KafkaConnection::authorize_group(const std::string& group) const {
  if (!service_.authorizes()) return common::Status::ok();
  return service_.authorization().check_subscription(role_, ns(), group);
}

void KafkaConnection::with_partition(const std::string& topic, int32_t partition, broker::TopicAction action,
                                     ledger::Callback<common::Result<broker::Topic*>> fn, bool create) {
  if (common::Status allowed = authorize(topic, action); !allowed.is_ok()) return fn(allowed);
  service_.with_partition(ns(), topic, partition, std::move(fn), create);
}

broker::ClientInfo KafkaConnection::client_info(const RequestHeader& header) const {
  return broker::ClientInfo{"kafka", conn_ == nullptr ? std::string() : std::string(conn_->peer()),
                            header.client_id.value_or(std::string()), connected_since_ms_};
}

std::string KafkaConnection::peer_host() const {
  return conn_ == nullptr ? std::string() : "/" + std::string(conn_->peer());
}

void KafkaConnection::close(const Status& why) {
  if (conn_ != nullptr) conn_->close(why);
}

void KafkaConnection::produce_waits() {
  ++produces_waiting_;
  if (watching_lease_ || service_.broker().ownership() == nullptr) return;
  watching_lease_ = true;
  watch_lease();
}

void KafkaConnection::watch_lease() {
  at(std::chrono::steady_clock::now() + kLeaseWatch, [this]() {
    if (produces_waiting_ == 0 || conn_ == nullptr) {
      watching_lease_ = false;
      return;
    }
    if (!let_go_on_lapsed_lease()) watch_lease();
  });
}

bool KafkaConnection::let_go_on_lapsed_lease() {
  const broker::Ownership* ownership = service_.broker().ownership();
  if (ownership == nullptr || conn_ == nullptr || ownership->lease_current()) return false;
  if (produces_waiting_ == 0 && producers_.empty()) return false;
  MLOG_WARN("kafka client {}: produces here ({} request(s) waiting) and this member's lease lapsed; closing",
            conn_->peer(), produces_waiting_);
  close(Status::unavailable("this member's lease lapsed: it cannot acknowledge produce requests"));
  return true;
}

broker::PublishLimits* KafkaConnection::publish_limits_for(const std::string& topic, int32_t partition) {
  auto t = publish_limits_.find(topic);
  if (t == publish_limits_.end()) return nullptr;
  auto p = t->second.find(partition);
  return p == t->second.end() ? nullptr : p->second.get();
}

void KafkaConnection::remember_publish_limits(const std::string& topic, int32_t partition,
                                              std::shared_ptr<broker::PublishLimits> limits) {
  publish_limits_[topic][partition] = std::move(limits);
}

void KafkaConnection::charge_publish(broker::PublishLimits& limits, int64_t messages, int64_t bytes) {
  if (throttle_.charge(limits, messages, bytes)) update_reading();
}

void KafkaConnection::hold_input(int64_t wait_ns) {
  throttle_.hold(wait_ns);
  update_reading();
}

void KafkaConnection::on_close(runtime::Connection&, const Status&) {
  throttle_.cancel();
  input_ = nullptr;
  auto& broker = service_.broker();
  for (const auto& [id, topic] : producer_topics_) {
    broker.with_existing_topic(topic, false, [id = id](common::Result<broker::Topic*> t) {
      if (t.is_ok()) (*t)->remove_producer(id);
    });
  }
  producers_.clear();
  producer_topics_.clear();
  publish_limits_.clear();
  // Not destroyed here: this may run inside the timer's own callback.
  if (timer_) timer_->cancel();
  parked_.clear();
  deadlines_.clear();
  conn_ = nullptr;
  link_->conn = nullptr;
}

}  // namespace magnetar::protocol::kafka
