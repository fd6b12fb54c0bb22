#include "protocol/pulsar/server/pulsar_connection.h"

#include <algorithm>

#include "common/logging.h"
#include "common/metrics.h"
#include "protocol/pulsar/commands.h"

namespace magnetar::protocol::pulsar {

using common::ErrorCode;
using common::Status;

namespace {

common::Counter& pauses_metric() {
  static common::Counter& pauses = common::MetricsRegistry::global().counter(
      "magnetar_pulsar_connection_pauses_total",
      "Times a Pulsar connection stopped reading because its publishes or requests awaiting an answer reached their "
      "bound");
  return pauses;
}

}  // namespace

// Gives the request's place back when the last copy of its RequestReplier
// is gone, on the connection's reactor (if the connection is still there).
struct RequestReplier::Place {
  Replier reply;
  size_t bytes;
  Place(Replier r, size_t b) : reply(std::move(r)), bytes(b) {}
  Place(const Place&) = delete;
  Place& operator=(const Place&) = delete;
  ~Place() {
    reply([bytes = bytes](PulsarConnection& conn) { conn.request_answered(bytes); });
  }
};

proto::ServerError server_error(const Status& st) {
  switch (st.code()) {
    case ErrorCode::kNotFound: return proto::TopicNotFound;
    case ErrorCode::kAlreadyExists: return proto::ProducerBusy;
    case ErrorCode::kFailedPrecondition:
    case ErrorCode::kLimitReached: return proto::ConsumerBusy;  // producers: producer_refusal
    // Pulsar's answer from a broker that does not own the topic: clients look it up again.
    case ErrorCode::kWrongNode: return proto::ServiceNotReady;
    case ErrorCode::kInvalidArgument: return proto::InvalidTopicName;
    case ErrorCode::kResourceExhausted: return proto::TooManyRequests;
    case ErrorCode::kUnavailable: return proto::ServiceNotReady;
    case ErrorCode::kIoError:
    case ErrorCode::kCorruption: return proto::PersistenceError;
    case ErrorCode::kPermissionDenied: return proto::AuthorizationError;
    case ErrorCode::kUnimplemented: return proto::NotAllowedError;
    case ErrorCode::kFenced: return proto::ProducerFenced;
    default: return proto::UnknownError;
  }
}

proto::ServerError topic_load_error(const Status& st) {
  // A topic count reached (maxTopicsPerNamespace, a tenant's maxTopics) is
  // Pulsar's NotAllowed; a topic that may not be created automatically is
  // TopicNotFound (server_error's kNotFound).
  if (st.code() == ErrorCode::kFailedPrecondition) return proto::NotAllowedError;
  return server_error(st);
}

common::Status PulsarConnection::use_tenant(const std::string& tenant) {
  if (tenant_slots.count(tenant) > 0) return common::Status::ok();
  auto slot = service_.broker().take_connection_slot(tenant);
  if (!slot.is_ok()) return slot.status();
  tenant_slots.emplace(tenant, std::move(slot).value());
  return common::Status::ok();
}

PulsarConnection::PulsarConnection(runtime::Reactor& reactor, PulsarService& service)
    : reactor_(reactor),
      service_(service),
      decoder_(service.options().frame_limits),
      link_(std::make_shared<ConnectionLink>(ConnectionLink{this})),
      throttle_(reactor,
                [this]() {
                  if (conn_ == nullptr) return;
                  update_reading();
                  if (input_ != nullptr) on_data(*conn_, *input_);
                }),
      publishes_(std::max<size_t>(1, service.options().max_pending_publishes),
                 std::max<size_t>(1, service.options().max_pending_publish_bytes)),
      requests_(std::max<size_t>(1, service.options().max_pending_requests),
                std::max<size_t>(1, service.options().max_pending_request_bytes)) {}

PulsarConnection::~PulsarConnection() { link_->conn = nullptr; }

void PulsarConnection::on_data(runtime::Connection& conn, common::SliceChain& input) {
  conn_ = &conn;
  input_ = &input;
  heard_ = true;
  awaiting_pong_ = false;
  if (!keepalive_) start_keepalive();
  while (!conn.closing() && conn.writable() && !input_held()) {
    const size_t before = input.size();
    switch (decoder_.decode(input, &frame_)) {
      case DecodeResult::kNeedMore:
        return;
      case DecodeResult::kFrame:
        frame_bytes_ = before - input.size();
        dispatch(frame_);
        frame_bytes_ = 0;
        break;
      case DecodeResult::kChecksumMismatch:
        if (frame_.command.has_send()) {
          send(commands::send_error(frame_.command.send().producer_id(), frame_.command.send().sequence_id(),
                                    proto::ChecksumError, decoder_.status().message()));
        }
        break;
      case DecodeResult::kMalformedFrame:
      case DecodeResult::kStreamError:
        MLOG_INFO("pulsar client {}: {}; closing", conn.peer(), decoder_.status().message());
        close(decoder_.status());
        return;
    }
  }
}

void PulsarConnection::dispatch(Frame& frame) {
  const auto& cmd = frame.command;
  if (!connected_ && cmd.type() != proto::BaseCommand::CONNECT) {
    close(Status::failed_precondition("the first command must be CONNECT"));
    return;
  }
  switch (cmd.type()) {
    case proto::BaseCommand::CONNECT: return handle_connect(*this, cmd.connect());
    case proto::BaseCommand::PING: return send(commands::pong());
    case proto::BaseCommand::PONG: return;
    case proto::BaseCommand::LOOKUP: return handle_lookup(*this, cmd.lookuptopic());
    case proto::BaseCommand::PARTITIONED_METADATA: return handle_partitioned_metadata(*this, cmd.partitionmetadata());
    case proto::BaseCommand::PRODUCER: return handle_producer(*this, cmd.producer());
    case proto::BaseCommand::SEND: return handle_send(*this, frame);
    case proto::BaseCommand::CLOSE_PRODUCER: return handle_close_producer(*this, cmd.close_producer());
    case proto::BaseCommand::SUBSCRIBE: return handle_subscribe(*this, cmd.subscribe());
    case proto::BaseCommand::FLOW: return handle_flow(*this, cmd.flow());
    case proto::BaseCommand::ACK: return handle_ack(*this, cmd.ack());
    case proto::BaseCommand::REDELIVER_UNACKNOWLEDGED_MESSAGES:
      return handle_redeliver(*this, cmd.redeliverunacknowledgedmessages());
    case proto::BaseCommand::CLOSE_CONSUMER: return handle_close_consumer(*this, cmd.close_consumer());
    case proto::BaseCommand::UNSUBSCRIBE: return handle_unsubscribe(*this, cmd.unsubscribe());
    case proto::BaseCommand::GET_LAST_MESSAGE_ID: return handle_get_last_message_id(*this, cmd.getlastmessageid());
    case proto::BaseCommand::SEEK: return handle_seek(*this, cmd.seek());
    case proto::BaseCommand::GET_SCHEMA: return handle_get_schema(*this, cmd.getschema());
    case proto::BaseCommand::GET_OR_CREATE_SCHEMA: return handle_get_or_create_schema(*this, cmd.getorcreateschema());
    case proto::BaseCommand::GET_TOPICS_OF_NAMESPACE:
      return handle_get_topics_of_namespace(*this, cmd.gettopicsofnamespace());
    case proto::BaseCommand::CONSUMER_STATS: return handle_consumer_stats(*this, cmd.consumerstats());
    // Transactions and topic-list watches are not served: answered with an
    // error the client matches to its request instead of waiting it out.
    case proto::BaseCommand::TC_CLIENT_CONNECT_REQUEST:
      return refuse(cmd.tcclientconnectrequest().request_id(), "the transaction coordinator");
    case proto::BaseCommand::NEW_TXN: return refuse(cmd.newtxn().request_id(), "NEW_TXN");
    case proto::BaseCommand::ADD_PARTITION_TO_TXN: return refuse(cmd.addpartitiontotxn().request_id(), "ADD_PARTITION_TO_TXN");
    case proto::BaseCommand::ADD_SUBSCRIPTION_TO_TXN:
      return refuse(cmd.addsubscriptiontotxn().request_id(), "ADD_SUBSCRIPTION_TO_TXN");
    case proto::BaseCommand::END_TXN: return refuse(cmd.endtxn().request_id(), "END_TXN");
    case proto::BaseCommand::WATCH_TOPIC_LIST: return refuse(cmd.watchtopiclist().request_id(), "WATCH_TOPIC_LIST");
    default:
      // Not served yet and carrying no request id to answer: ignored without
      // dropping the connection, so the client's other work goes on.
      MLOG_DEBUG("pulsar: unsupported command type {}", frame.wire_type);
      return;
  }
}

void PulsarConnection::refuse(uint64_t request_id, std::string_view what) {
  send(commands::error(request_id, proto::NotAllowedError, std::string(what) + " is not served yet"));
}

void PulsarConnection::send(const proto::BaseCommand& command) {
  if (conn_ != nullptr) conn_->write(encode_command(command));
}

void PulsarConnection::send_slices(common::Slice head, common::Slice entry) {
  if (conn_ == nullptr) return;
  conn_->write(std::move(head));
  conn_->write(std::move(entry));
}

void PulsarConnection::deliver(uint64_t consumer_id, uint64_t broker_id, int32_t partition,
                               std::vector<broker::Delivery>& entries) {
  int64_t cost = 0;
  for (auto& d : entries) {
    cost += broker::delivery_cost(d.payload.size());
    auto id = commands::message_id(d.position.ledger, static_cast<uint64_t>(d.position.entry), partition);
    auto cmd = commands::message(consumer_id, id, d.redelivery_count);
    // A partly acknowledged batch: ack_set has a bit set for each message
    // still unacknowledged, so the client skips the others.
    for (uint32_t i = 0; !d.batch_acks.empty() && i < d.header.messages; i += 64) {
      uint64_t word = i / 64 < d.batch_acks.size() ? ~d.batch_acks[i / 64] : ~uint64_t{0};
      if (d.header.messages - i < 64) word &= (uint64_t{1} << (d.header.messages - i)) - 1;
      cmd.mutable_message()->add_ack_set(static_cast<int64_t>(word));
    }
    common::Slice head = encode_payload_head(cmd, d.payload.size());
    send_slices(std::move(head), std::move(d.payload));
  }
  auto it = consumers.find(consumer_id);
  if (it == consumers.end() || it->second.broker_id != broker_id) return;
  it->second.credit.delivered(cost);
  hand_credit(it->second);
}

void PulsarConnection::hand_credit(ConsumerState& consumer) {
  if (conn_ == nullptr || !conn_->writable()) return;
  const int64_t credit = consumer.credit.take();
  if (credit == 0) return;
  with_subscription(consumer, [credit](broker::Subscription& s, uint64_t broker_id) { s.add_credit(broker_id, credit); });
}

void PulsarConnection::with_subscription(const ConsumerState& consumer,
                                         std::function<void(broker::Subscription&, uint64_t)> fn) {
  service_.broker().with_topic(consumer.topic, [sub = consumer.subscription, broker_id = consumer.broker_id,
                                                fn = std::move(fn)](common::Result<broker::Topic*> t) {
    if (!t.is_ok()) return;
    if (auto* s = (*t)->subscription(sub)) fn(*s, broker_id);
  });
}

void PulsarConnection::detach(const ConsumerState& consumer) {
  service_.broker().with_topic(consumer.topic, [sub = consumer.subscription, broker_id = consumer.broker_id,
                                                sink = consumer.sink](common::Result<broker::Topic*> t) {
    if (t.is_ok()) (*t)->remove_consumer(sub, broker_id);
  });
}

void PulsarConnection::on_writable_changed(runtime::Connection&, bool writable) {
  if (!writable) return;
  for (auto& [id, consumer] : consumers) hand_credit(consumer);
}

void PulsarConnection::charge_publish(broker::PublishLimits& limits, int64_t messages, int64_t bytes) {
  if (throttle_.charge(limits, messages, bytes)) update_reading();
}

void PulsarConnection::publish_started(size_t bytes) {
  if (!publishes_.add(bytes)) return;
  pauses_metric().inc();
  update_reading();
}

void PulsarConnection::publish_finished(size_t bytes) {
  if (!publishes_.remove(bytes)) return;
  update_reading();
  schedule_decode();
}

RequestReplier PulsarConnection::request_replier(size_t answer_bytes) {
  const size_t bytes = std::max(frame_bytes_, answer_bytes);
  if (requests_.add(bytes)) {
    pauses_metric().inc();
    update_reading();
  }
  return RequestReplier(replier(), std::make_shared<RequestReplier::Place>(replier(), bytes));
}

void PulsarConnection::request_answered(size_t bytes) {
  if (!requests_.remove(bytes)) return;
  update_reading();
  schedule_decode();
}

void PulsarConnection::update_reading() {
  if (conn_ == nullptr) return;
  if (input_held()) {
    conn_->pause_reading();
  } else {
    conn_->resume_reading();
  }
}

void PulsarConnection::schedule_decode() {
  if (input_ == nullptr || input_->empty()) return;
  reactor_.defer([link = std::weak_ptr<ConnectionLink>(link_)]() {
    auto l = link.lock();
    if (!l || l->conn == nullptr) return;
    PulsarConnection& c = *l->conn;
    if (c.conn_ != nullptr && c.input_ != nullptr) c.on_data(*c.conn_, *c.input_);
  });
}

void PulsarConnection::start_keepalive() {
  auto interval = service_.options().keepalive;
  if (interval.count() <= 0) return;
  keepalive_ = std::make_unique<runtime::Timer>(reactor_);
  keepalive_->every(interval, [this]() { keepalive_tick(); });
}

void PulsarConnection::keepalive_tick() {
  if (conn_ == nullptr) return;
  // While the input is held (a publish limit, a full window), the client's
  // answers wait unread.
  if (input_held()) heard_ = true;
  if (awaiting_pong_ && !heard_) {
    MLOG_INFO("pulsar client {}: no answer to PING; closing", conn_->peer());
    close(Status::timeout("no answer to the keep-alive PING"));
    return;
  }
  if (!heard_) {
    send(commands::ping());
    awaiting_pong_ = true;
  }
  heard_ = false;
}

broker::ClientInfo PulsarConnection::client_info() const {
  return broker::ClientInfo{"pulsar", peer(), client_version, connected_since_ms};
}

std::string PulsarConnection::peer() const { return conn_ != nullptr ? conn_->peer() : std::string(); }

void PulsarConnection::close(const Status& why) {
  if (conn_ != nullptr) conn_->close(why);
}

void PulsarConnection::on_close(runtime::Connection&, const Status& reason) {
  drop_all();
  keepalive_.reset();
  throttle_.cancel();
  conn_ = nullptr;
  input_ = nullptr;
  link_->conn = nullptr;
}

// Detaches this connection's producers and consumers from their topics.
void PulsarConnection::drop_all() {
  auto& broker = service_.broker();
  for (auto& [id, p] : producers) {
    broker.with_topic(p.topic, [broker_id = p.broker_id](common::Result<broker::Topic*> t) {
      if (t.is_ok()) (*t)->remove_producer(broker_id);
    });
  }
  for (auto& [id, c] : consumers) detach(c);
  producers.clear();
  consumers.clear();
}

void PulsarConsumerSink::to_connection(std::function<void(PulsarConnection&)> fn) {
  Replier(link_, conn_reactor_)(std::move(fn));
}

void PulsarConsumerSink::deliver(std::vector<broker::Delivery> entries) {
  to_connection([consumer_id = consumer_id_, broker_id = broker_id_, partition = partition_,
                 entries = std::move(entries)](PulsarConnection& c) mutable {
    c.deliver(consumer_id, broker_id, partition, entries);
  });
}

void PulsarConsumerSink::closed(const Status& why) {
  to_connection([consumer_id = consumer_id_, broker_id = broker_id_](PulsarConnection& c) {
    // A consumer the client attached since under the same id is not this one.
    auto it = c.consumers.find(consumer_id);
    if (it != c.consumers.end()) {
      if (it->second.broker_id != broker_id) return;
      c.consumers.erase(it);
    }
    // Tells the client to reconnect (and look the topic up again).
    proto::BaseCommand cmd;
    cmd.set_type(proto::BaseCommand::CLOSE_CONSUMER);
    cmd.mutable_close_consumer()->set_consumer_id(consumer_id);
    cmd.mutable_close_consumer()->set_request_id(0);
    c.send(cmd);
  });
}

void PulsarConsumerSink::active_changed(bool active) {
  uint64_t consumer_id = consumer_id_;
  to_connection([consumer_id, active](PulsarConnection& c) {
    proto::BaseCommand cmd;
    cmd.set_type(proto::BaseCommand::ACTIVE_CONSUMER_CHANGE);
    cmd.mutable_active_consumer_change()->set_consumer_id(consumer_id);
    cmd.mutable_active_consumer_change()->set_is_active(active);
    c.send(cmd);
  });
}

}  // namespace magnetar::protocol::pulsar
