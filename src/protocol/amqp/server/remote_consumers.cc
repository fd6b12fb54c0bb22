#include "protocol/amqp/server/remote_consumers.h"

#include <set>

#include <fmt/format.h>

#include "broker/broker_service.h"
#include "broker/ownership.h"
#include "cluster/rpc_format.h"
#include "cluster/rpc_records.h"
#include "common/logging.h"
#include "protocol/amqp/server/amqp_connection.h"
#include "protocol/amqp/server/amqp_service.h"
#include "protocol/amqp/server/cluster_generated.h"
#include "protocol/amqp/server/queue_limits.h"
#include "runtime/runtime.h"

namespace magnetar::protocol::amqp {

using common::Result;
using common::Status;

namespace {

constexpr auto kOpenMethod = static_cast<uint16_t>(cluster::rpc::Method::kAmqpConsumeOpen);
constexpr auto kOpMethod = static_cast<uint16_t>(cluster::rpc::Method::kAmqpConsumerOp);
constexpr auto kDeliveriesMethod = static_cast<uint16_t>(cluster::rpc::Method::kAmqpDeliveries);
constexpr std::chrono::milliseconds kLivenessCheck{2000};

Status status_of(uint8_t code, const flatbuffers::String* message) {
  if (code == 0) return Status::ok();
  return Status(static_cast<common::ErrorCode>(code), message != nullptr ? message->str() : std::string());
}

std::string open_reply(const Status& st, int64_t skip_below = 0) {
  flatbuffers::FlatBufferBuilder b(64 + st.message().size());
  auto message = b.CreateString(st.message());
  b.Finish(fb::CreateConsumeOpenReply(b, 1, static_cast<uint8_t>(st.code()), message, skip_below));
  return cluster::record_bytes(b);
}

std::string op_reply(const Status& st) {
  flatbuffers::FlatBufferBuilder b(64 + st.message().size());
  auto message = b.CreateString(st.message());
  b.Finish(fb::CreateConsumerOpReply(b, 1, static_cast<uint8_t>(st.code()), message));
  return cluster::record_bytes(b);
}

std::string deliveries_reply(bool known) {
  flatbuffers::FlatBufferBuilder b(32);
  b.Finish(fb::CreateConsumerDeliveriesReply(b, 1, known));
  return cluster::record_bytes(b);
}

struct OpPosition {
  ledger::Position position;
  uint32_t batch_index = 0;
  uint32_t batch_size = 1;
};

std::string encode_op(uint64_t origin, uint64_t session, fb::ConsumerOpKind kind, uint32_t permits,
                      const std::vector<OpPosition>& positions, const std::string& auto_delete_queue = {}) {
  flatbuffers::FlatBufferBuilder b(64 + positions.size() * 32);
  std::vector<flatbuffers::Offset<fb::ConsumerPosition>> list;
  list.reserve(positions.size());
  for (const auto& p : positions) {
    list.push_back(fb::CreateConsumerPosition(b, p.position.ledger, p.position.entry, p.batch_index, p.batch_size));
  }
  auto positions_v = b.CreateVector(list);
  auto queue = b.CreateString(auto_delete_queue);
  b.Finish(fb::CreateConsumerOp(b, 1, session, origin, kind, permits, positions_v, queue));
  return cluster::record_bytes(b);
}

}  // namespace

// The owner's sink for a consumer of another member: what the broker gives
// it goes to that member, in order (one call after another on the channel
// between them).
class RemoteConsumers::ForwardingSink final : public broker::ConsumerSink {
 public:
  ForwardingSink(std::weak_ptr<RemoteConsumers> registry, broker::RemoteCalls& calls, ServedKey key)
      : registry_(std::move(registry)), calls_(calls), key_(key) {}

  void deliver(std::vector<broker::Delivery> entries) override {
    size_t bytes = 256;
    for (const auto& d : entries) bytes += d.payload.size() + 64;
    flatbuffers::FlatBufferBuilder b(bytes);
    std::vector<flatbuffers::Offset<fb::ForwardedDelivery>> list;
    list.reserve(entries.size());
    for (const auto& d : entries) {
      auto payload = b.CreateVector(reinterpret_cast<const uint8_t*>(d.payload.data()), d.payload.size());
      list.push_back(fb::CreateForwardedDelivery(b, d.position.ledger, d.position.entry, d.redelivery_count,
                                                 d.header.messages, d.header.first_index, d.header.publish_time_ms,
                                                 d.header.more_chunks, payload));
    }
    auto list_v = b.CreateVector(list);
    b.Finish(fb::CreateConsumerDeliveries(b, 1, key_.second, list_v, false, 0, 0));
    send(cluster::record_bytes(b));
  }

  void closed(const Status& why) override {
    flatbuffers::FlatBufferBuilder b(64 + why.message().size());
    auto message = b.CreateString(why.message());
    b.Finish(fb::CreateConsumerDeliveries(b, 1, key_.second, 0, true, static_cast<uint8_t>(why.code()), message));
    send(cluster::record_bytes(b), /*last=*/true);
  }

 private:
  void send(std::string payload, bool last = false) {
    calls_.call(key_.first, kDeliveriesMethod, std::move(payload),
                [registry = registry_, key = key_, last](Result<std::string> r) {
                  bool known = false;
                  if (r.is_ok()) {
                    const auto* reply = cluster::verified_record<fb::ConsumerDeliveriesReply>(*r);
                    known = reply != nullptr && reply->known();
                  }
                  auto self = registry.lock();
                  if (self == nullptr) return;
                  if (last) {
                    std::lock_guard lock(self->mu_);
                    self->served_.erase(key);
                    return;
                  }
                  // The consumer's member is gone, or its consumer is: what
                  // this consumer holds goes back to the queue.
                  if (!known) self->end_served(key, {});
                });
  }

  std::weak_ptr<RemoteConsumers> registry_;
  broker::RemoteCalls& calls_;
  const ServedKey key_;
};

RemoteSession::~RemoteSession() { close({}); }

void RemoteSession::flow(uint32_t permits) {
  registry_->send_op(owner_, session_,
                     encode_op(registry_->self_, session_, fb::ConsumerOpKind::Flow, permits, {}));
}

void RemoteSession::ack(ledger::Position p) {
  registry_->send_op(owner_, session_,
                     encode_op(registry_->self_, session_, fb::ConsumerOpKind::Ack, 0, {{p, 0, 1}}));
}

void RemoteSession::ack_batch_index(ledger::Position p, uint32_t index, uint32_t size) {
  registry_->send_op(owner_, session_,
                     encode_op(registry_->self_, session_, fb::ConsumerOpKind::AckBatchIndex, 0, {{p, index, size}}));
}

void RemoteSession::redeliver(const std::vector<ledger::Position>& positions) {
  std::vector<OpPosition> list;
  list.reserve(positions.size());
  for (const auto& p : positions) list.push_back({p, 0, 1});
  registry_->send_op(owner_, session_,
                     encode_op(registry_->self_, session_, fb::ConsumerOpKind::Redeliver, 0, list));
}

void RemoteSession::close(const std::string& auto_delete_queue) {
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
  }
  registry_->forget_consumed(session_);
  registry_->send_op(owner_, session_,
                     encode_op(registry_->self_, session_, fb::ConsumerOpKind::Close, 0, {}, auto_delete_queue));
}

RemoteConsumers::RemoteConsumers(AmqpService& service, runtime::Runtime& runtime, broker::RemoteCalls& calls,
                                 broker::Ownership& ownership, uint64_t self)
    : service_(service), runtime_(runtime), calls_(calls), ownership_(ownership), self_(self) {}

RemoteConsumers::~RemoteConsumers() = default;

void RemoteConsumers::start() {
  std::weak_ptr<RemoteConsumers> weak = weak_from_this();
  calls_.handle(kOpenMethod, [weak](std::string_view payload, broker::RemoteCalls::Reply reply) {
    auto self = weak.lock();
    if (self == nullptr) return reply(open_reply(Status::unavailable("this member is stopping")));
    self->serve_open(payload, std::move(reply));
  });
  calls_.handle(kOpMethod, [weak](std::string_view payload, broker::RemoteCalls::Reply reply) {
    auto self = weak.lock();
    if (self == nullptr) return reply(op_reply(Status::unavailable("this member is stopping")));
    self->serve_op(payload, std::move(reply));
  });
  calls_.handle(kDeliveriesMethod, [weak](std::string_view payload, broker::RemoteCalls::Reply reply) {
    auto self = weak.lock();
    if (self == nullptr) return reply(deliveries_reply(false));
    self->serve_deliveries(payload, std::move(reply));
  });
  runtime_.reactor(0).post_or_wait([this, weak]() {
    timer_ = std::make_unique<runtime::Timer>(runtime_.reactor(0));
    timer_->every(kLivenessCheck, [weak]() {
      if (auto self = weak.lock()) self->check_liveness();
    });
  });
}

void RemoteConsumers::stop() {
  runtime_.reactor(0).post_or_wait([this]() { timer_.reset(); });
  std::vector<ServedKey> served;
  std::vector<std::shared_ptr<broker::ConsumerSink>> consumed;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    for (const auto& [key, s] : served_) served.push_back(key);
    for (const auto& [session, c] : consumed_) {
      if (auto sink = c.sink.lock()) consumed.push_back(std::move(sink));
    }
    consumed_.clear();
  }
  for (const auto& key : served) end_served(key, {});
  for (const auto& sink : consumed) sink->closed(Status::unavailable("this member is stopping"));
}

void RemoteConsumers::open(uint64_t owner, const broker::TopicName& topic, const broker::ConsumerOptions& options,
                           const std::shared_ptr<broker::ConsumerSink>& sink, const std::optional<StreamStart>& stream,
                           Opened done) {
  const uint64_t session = service_.next_id();
  {
    std::lock_guard lock(mu_);
    if (stopped_) return done(Status::unavailable("this member is stopping"));
    consumed_[session] = Consumed{owner, sink};
  }
  flatbuffers::FlatBufferBuilder b(256);
  auto topic_s = b.CreateString(topic.to_string());
  auto subscription = b.CreateString(options.subscription);
  auto name = b.CreateString(options.consumer_name);
  auto address = b.CreateString(options.client.address);
  b.Finish(fb::CreateConsumeOpen(b, 1, self_, session, topic_s, subscription, static_cast<uint8_t>(options.type),
                                 options.priority, name, 0, address, options.durable, stream.has_value(),
                                 stream ? static_cast<uint8_t>(stream->kind) : 0, stream ? stream->value : 0));
  calls_.call(owner, kOpenMethod, cluster::record_bytes(b),
              [self = shared_from_this(), owner, session, done = std::move(done)](Result<std::string> r) {
                Status st = r.status();
                int64_t skip_below = 0;
                if (r.is_ok()) {
                  const auto* reply = cluster::verified_record<fb::ConsumeOpenReply>(*r);
                  st = reply != nullptr ? status_of(reply->code(), reply->message())
                                        : Status::internal("a member answered a consumer's opening unreadably");
                  if (reply != nullptr) skip_below = reply->skip_below();
                }
                if (!st.is_ok()) {
                  self->forget_consumed(session);
                  return done(st);
                }
                done(std::make_shared<RemoteSession>(self, owner, session, skip_below));
              });
}

void RemoteConsumers::send_op(uint64_t owner, uint64_t session, std::string payload) {
  calls_.call(owner, kOpMethod, std::move(payload), [weak = weak_from_this(), session](Result<std::string> r) {
    Status st = r.status();
    if (r.is_ok()) {
      const auto* reply = cluster::verified_record<fb::ConsumerOpReply>(*r);
      st = reply != nullptr ? status_of(reply->code(), reply->message())
                            : Status::internal("a member answered a consumer's operation unreadably");
    }
    if (st.is_ok()) return;
    // A lost permit would stall the consumer for good, and a lost
    // acknowledgement leaves a message held: the consumer is cancelled
    // (the client hears basic.cancel) and the owner puts back what it held.
    auto self = weak.lock();
    if (self == nullptr) return;
    std::shared_ptr<broker::ConsumerSink> sink;
    {
      std::lock_guard lock(self->mu_);
      auto it = self->consumed_.find(session);
      if (it == self->consumed_.end()) return;
      sink = it->second.sink.lock();
      self->consumed_.erase(it);
    }
    MLOG_WARN("amqp: a consumer's operation failed at its queue's member: {}; the consumer is cancelled",
              st.message());
    if (sink != nullptr) sink->closed(Status::unavailable("the cluster member that owns the queue did not answer"));
  });
}

void RemoteConsumers::forget_consumed(uint64_t session) {
  std::lock_guard lock(mu_);
  consumed_.erase(session);
}

void RemoteConsumers::serve_open(std::string_view payload, std::function<void(std::string)> reply) {
  const auto* call = cluster::verified_record<fb::ConsumeOpen>(payload);
  auto topic = call != nullptr && call->topic() != nullptr ? broker::TopicName::parse(call->topic()->string_view())
                                                           : Result<broker::TopicName>(Status::invalid_argument(""));
  if (!topic.is_ok() || topic->to_string() != call->topic()->string_view() || call->subscription() == nullptr ||
      call->type() > static_cast<uint8_t>(broker::SubscriptionType::kKeyShared) ||
      call->start_kind() > static_cast<uint8_t>(StreamStart::Kind::kTime)) {
    return reply(open_reply(Status::invalid_argument("a consumer's opening was refused: it does not decode")));
  }
  const ServedKey key{call->origin(), call->session()};
  broker::ConsumerOptions options;
  options.subscription = call->subscription()->str();
  options.type = static_cast<broker::SubscriptionType>(call->type());
  options.priority = call->priority();
  options.consumer_name = call->consumer_name() != nullptr ? call->consumer_name()->str() : std::string("amqp");
  options.initial_position = broker::InitialPosition::kLatest;
  options.client = {"amqp", call->client_address() != nullptr ? call->client_address()->str() : std::string(), {}, 0};
  options.durable = call->durable();
  std::optional<StreamStart> stream;
  if (call->stream()) stream = StreamStart{static_cast<StreamStart::Kind>(call->start_kind()), call->start_value()};
  auto sink = std::make_shared<ForwardingSink>(weak_from_this(), calls_, key);
  const uint64_t consumer_id = service_.next_id();
  {
    std::lock_guard lock(mu_);
    if (stopped_) return reply(open_reply(Status::unavailable("this member is stopping")));
    if (served_.count(key)) return reply(open_reply(Status::already_exists("the consumer is open already")));
    served_[key] = Served{*topic, options.subscription, consumer_id, sink};
  }
  service_.broker().with_topic(
      *topic, [self = shared_from_this(), key, consumer_id, options = std::move(options), sink, stream,
               reply](Result<broker::Topic*> t) mutable {
        auto refuse = [self, key, reply](const Status& st) {
          {
            std::lock_guard lock(self->mu_);
            self->served_.erase(key);
          }
          reply(open_reply(st));
        };
        if (!t.is_ok()) return refuse(t.status());
        broker::Topic* found = *t;
        auto subscribe = [found, consumer_id, options = std::move(options), sink, reply, refuse](
                             std::optional<ledger::Position> start_after, broker::InitialPosition initial,
                             int64_t skip_below) mutable {
          options.start_after = start_after;
          options.initial_position = initial;
          found->subscribe(consumer_id, std::move(options), sink.get(),
                           [reply, refuse, skip_below](Result<broker::Subscription*> s) {
                             if (!s.is_ok()) return refuse(s.status());
                             reply(open_reply(Status::ok(), skip_below));
                           });
        };
        if (!stream) return subscribe(std::nullopt, broker::InitialPosition::kLatest, 0);
        stream_start(*found, *stream, std::move(subscribe));
      });
}

void RemoteConsumers::serve_op(std::string_view payload, std::function<void(std::string)> reply) {
  const auto* op = cluster::verified_record<fb::ConsumerOp>(payload);
  if (op == nullptr) return reply(op_reply(Status::invalid_argument("a consumer's operation does not decode")));
  const ServedKey key{op->origin(), op->session()};
  if (op->kind() == fb::ConsumerOpKind::Close) {
    end_served(key, op->auto_delete_queue() != nullptr ? op->auto_delete_queue()->str() : std::string());
    return reply(op_reply(Status::ok()));
  }
  Served served;
  {
    std::lock_guard lock(mu_);
    auto it = served_.find(key);
    if (it == served_.end()) return reply(op_reply(Status::not_found("no such consumer")));
    served = it->second;
  }
  std::vector<OpPosition> positions;
  if (op->positions() != nullptr) {
    for (const auto* p : *op->positions()) {
      positions.push_back({ledger::Position{p->ledger(), p->entry()}, p->batch_index(), p->batch_size()});
    }
  }
  const auto kind = op->kind();
  const uint32_t permits = op->permits();
  service_.broker().with_existing_topic(
      served.topic, false, [served, kind, permits, positions = std::move(positions)](Result<broker::Topic*> t) {
        if (!t.is_ok()) return;
        broker::Subscription* s = (*t)->subscription(served.subscription);
        if (s == nullptr) return;
        const uint64_t id = served.consumer_id;
        switch (kind) {
          case fb::ConsumerOpKind::Flow: return s->flow(id, permits);
          case fb::ConsumerOpKind::Ack:
            for (const auto& p : positions) (void)s->ack(id, p.position);
            return;
          case fb::ConsumerOpKind::AckBatchIndex:
            for (const auto& p : positions) (void)s->ack_batch_index(id, p.position, p.batch_index, p.batch_size);
            return;
          case fb::ConsumerOpKind::Redeliver: {
            std::vector<ledger::Position> list;
            for (const auto& p : positions) list.push_back(p.position);
            if (!list.empty()) s->redeliver_unacknowledged(id, list);
            return;
          }
          default: return;
        }
      });
  reply(op_reply(Status::ok()));
}

void RemoteConsumers::serve_deliveries(std::string_view payload, std::function<void(std::string)> reply) {
  const auto* call = cluster::verified_record<fb::ConsumerDeliveries>(payload);
  if (call == nullptr) return reply(deliveries_reply(false));
  std::shared_ptr<broker::ConsumerSink> sink;
  {
    std::lock_guard lock(mu_);
    auto it = consumed_.find(call->session());
    if (it != consumed_.end()) sink = it->second.sink.lock();
    if (sink == nullptr || call->closed()) consumed_.erase(call->session());
  }
  if (sink == nullptr) return reply(deliveries_reply(false));
  if (call->closed()) {
    sink->closed(status_of(call->code(), call->message()));
    return reply(deliveries_reply(true));
  }
  std::vector<broker::Delivery> entries;
  if (call->entries() != nullptr) {
    entries.reserve(call->entries()->size());
    for (const auto* e : *call->entries()) {
      broker::Delivery d;
      d.position = ledger::Position{e->ledger(), e->entry()};
      d.redelivery_count = e->redelivery_count();
      d.header.messages = e->messages();
      d.header.first_index = e->first_index();
      d.header.publish_time_ms = e->publish_time_ms();
      d.header.more_chunks = e->more_chunks();
      if (e->payload() != nullptr) {
        d.payload = common::Slice::copy_of(
            std::string_view(reinterpret_cast<const char*>(e->payload()->data()), e->payload()->size()));
      }
      entries.push_back(std::move(d));
    }
  }
  sink->deliver(std::move(entries));
  reply(deliveries_reply(true));
}

void RemoteConsumers::end_served(const ServedKey& key, const std::string& auto_delete_queue) {
  Served served;
  {
    std::lock_guard lock(mu_);
    auto it = served_.find(key);
    if (it == served_.end()) return;
    served = std::move(it->second);
    served_.erase(it);
  }
  // `served` keeps the sink alive until the broker has let go of it.
  service_.broker().with_existing_topic(
      served.topic, false, [&service = service_, served, auto_delete_queue](Result<broker::Topic*> t) {
        if (!t.is_ok()) return;
        // A reader's (a stream consumer's) subscription goes with it.
        (*t)->remove_consumer(served.subscription, served.consumer_id);
        broker::Subscription* s = (*t)->subscription(served.subscription);
        // An auto-delete queue goes with its last consumer.
        if (s != nullptr && !auto_delete_queue.empty() && s->consumer_count() == 0 && !service.stopping()) {
          delete_queues(service, served.topic.ns, {auto_delete_queue});
        }
      });
}

void RemoteConsumers::check_liveness() {
  std::set<uint64_t> live;
  for (const auto& node : ownership_.live_nodes()) live.insert(node.node);
  std::vector<ServedKey> orphaned;
  std::vector<std::shared_ptr<broker::ConsumerSink>> cut_off;
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, s] : served_) {
      if (!live.count(key.first)) orphaned.push_back(key);
    }
    for (auto it = consumed_.begin(); it != consumed_.end();) {
      if (live.count(it->second.owner)) {
        ++it;
        continue;
      }
      if (auto sink = it->second.sink.lock()) cut_off.push_back(std::move(sink));
      it = consumed_.erase(it);
    }
  }
  for (const auto& key : orphaned) {
    MLOG_INFO("amqp: member {} is gone: its consumer {} of this member's queue is removed", key.first, key.second);
    end_served(key, {});
  }
  for (const auto& sink : cut_off) {
    sink->closed(Status::unavailable("the cluster member that owns the queue is not reachable"));
  }
}

}  // namespace magnetar::protocol::amqp
