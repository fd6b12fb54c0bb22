#include "protocol/amqp/server/forwarding.h"

#include <map>
#include <mutex>

#include <fmt/format.h>

#include "broker/broker_service.h"
#include "broker/ownership.h"
#include "cluster/rpc_format.h"
#include "cluster/rpc_records.h"
#include "common/logging.h"
#include "protocol/amqp/server/amqp_service.h"
#include "protocol/amqp/server/cluster_generated.h"
#include "protocol/amqp/server/queue_limits.h"

namespace magnetar::protocol::amqp {

using common::Result;
using common::Status;

namespace {

constexpr auto kPublishMethod = static_cast<uint16_t>(cluster::rpc::Method::kAmqpPublish);
constexpr auto kTopicMethod = static_cast<uint16_t>(cluster::rpc::Method::kAmqpQueueTopic);

// The outcomes of a message's parts (copies stored here, each owner's),
// settled together: the first failure, and whether any queue refused it.
class Outcomes {
 public:
  Outcomes(size_t parts, StoredCallback done) : left_(parts), done_(std::move(done)) {}
  void part(const Status& st, bool rejected) {
    std::unique_lock lock(mu_);
    if (!st.is_ok() && failed_.is_ok()) failed_ = st;
    rejected_ = rejected_ || rejected;
    if (--left_ > 0) return;
    lock.unlock();
    done_(failed_, rejected_);
  }

 private:
  std::mutex mu_;
  size_t left_;
  Status failed_;
  bool rejected_ = false;
  StoredCallback done_;
};

std::string encode_outcome(const Status& st, bool rejected) {
  flatbuffers::FlatBufferBuilder b(64 + st.message().size());
  auto message = b.CreateString(st.message());
  b.Finish(fb::CreatePublishOutcome(b, 1, static_cast<uint8_t>(st.code()), message, rejected));
  return cluster::record_bytes(b);
}

std::string encode_publish(const Publication& p, const std::vector<RoutedCopy>& copies) {
  flatbuffers::FlatBufferBuilder b(p.message.body.size() + p.message.properties.size() + 256);
  std::vector<flatbuffers::Offset<flatbuffers::String>> queues;
  std::vector<uint8_t> levels;
  for (const RoutedCopy& c : copies) {
    queues.push_back(b.CreateString(c.queue));
    levels.push_back(c.level);
  }
  auto queues_v = b.CreateVector(queues);
  auto levels_v = b.CreateVector(levels);
  auto vhost = b.CreateString(p.vhost.to_string());
  auto exchange = b.CreateString(p.message.exchange);
  auto routing_key = b.CreateString(p.message.routing_key);
  auto properties = b.CreateVector(reinterpret_cast<const uint8_t*>(p.message.properties.data()),
                                   p.message.properties.size());
  auto body = b.CreateVector(reinterpret_cast<const uint8_t*>(p.message.body.data()), p.message.body.size());
  auto producer = b.CreateString(p.producer_name);
  auto address = b.CreateString(p.client.address);
  b.Finish(fb::CreateForwardedPublish(b, 1, vhost, queues_v, levels_v, exchange, routing_key, properties, body,
                                      p.publish_time_ms, producer, p.sequence, address));
  return cluster::record_bytes(b);
}

common::Slice slice_of(const flatbuffers::Vector<uint8_t>* v) {
  if (v == nullptr) return {};
  return common::Slice::copy_of(std::string_view(reinterpret_cast<const char*>(v->data()), v->size()));
}

// The publication a member sent, with this member's producer; null when the
// call does not make one.
std::shared_ptr<Publication> decode_publish(AmqpService& service, std::string_view payload, std::string* why) {
  const auto* call = cluster::verified_record<fb::ForwardedPublish>(payload);
  if (call == nullptr || call->vhost() == nullptr || call->queues() == nullptr) {
    *why = "not a forwarded publish";
    return nullptr;
  }
  auto ns = broker::NamespaceName::parse(call->vhost()->string_view());
  if (!ns) {
    *why = fmt::format("vhost '{}' is not a namespace", call->vhost()->string_view());
    return nullptr;
  }
  auto p = std::make_shared<Publication>();
  p->vhost = *ns;
  for (flatbuffers::uoffset_t k = 0; k < call->queues()->size(); ++k) {
    const uint8_t level = call->levels() != nullptr && k < call->levels()->size() ? call->levels()->Get(k) : 0;
    p->copies.push_back({call->queues()->Get(k)->str(), level});
  }
  p->message.exchange = call->exchange() != nullptr ? call->exchange()->str() : std::string();
  p->message.routing_key = call->routing_key() != nullptr ? call->routing_key()->str() : std::string();
  p->message.properties = slice_of(call->properties());
  p->message.body = slice_of(call->body());
  p->publish_time_ms = call->publish_time_ms();
  p->producer_name = call->producer() != nullptr ? call->producer()->str() : std::string();
  p->sequence = call->sequence();
  p->producer_id = service.forwarded_producer_id();
  p->client = {"amqp", call->client_address() != nullptr ? call->client_address()->str() : std::string(), {}, 0};
  auto props = decode_properties(p->message.properties);
  if (!props) {
    *why = "its properties do not decode";
    return nullptr;
  }
  ContentHeader header;
  header.body_size = p->message.body.size();
  header.properties = std::move(*props);
  header.raw_properties = p->message.properties;
  p->entry = message_to_entry(p->message.exchange, p->message.routing_key, header, p->message.body.view(),
                              p->publish_time_ms, p->producer_name, p->sequence);
  return p;
}

// Sends the copies of `p` that `node` owns there.
void forward(broker::RemoteCalls& calls, uint64_t node, const Publication& p, const std::vector<RoutedCopy>& copies,
             StoredCallback done) {
  calls.call(node, kPublishMethod, encode_publish(p, copies), [done = std::move(done)](Result<std::string> r) {
    if (!r.is_ok()) return done(r.status(), false);
    const auto* outcome = cluster::verified_record<fb::PublishOutcome>(*r);
    if (outcome == nullptr) return done(Status::internal("a member answered a forwarded publish unreadably"), false);
    if (outcome->code() == 0) return done(Status::ok(), outcome->rejected());
    const std::string message = outcome->message() != nullptr ? outcome->message()->str() : std::string();
    done(Status(static_cast<common::ErrorCode>(outcome->code()), message), outcome->rejected());
  });
}

std::string encode_counts(const Result<QueueCounts>& r) {
  const Status st = r.is_ok() ? Status::ok() : r.status();
  flatbuffers::FlatBufferBuilder b(64 + st.message().size());
  auto message = b.CreateString(st.message());
  const QueueCounts counts = r.is_ok() ? *r : QueueCounts{};
  b.Finish(fb::CreateTopicCallReply(b, 1, static_cast<uint8_t>(st.code()), message, counts.messages,
                                    counts.consumers));
  return cluster::record_bytes(b);
}

void serve_topic_calls(AmqpService& service, broker::RemoteCalls& calls) {
  calls.handle(kTopicMethod, [&service](std::string_view payload, broker::RemoteCalls::Reply reply) {
    if (service.stopping()) return reply(encode_counts(Status::unavailable("this member is stopping")));
    const auto* call = cluster::verified_record<fb::TopicCall>(payload);
    auto topic = call != nullptr && call->topic() != nullptr ? broker::TopicName::parse(call->topic()->string_view())
                                                             : Result<broker::TopicName>(Status::invalid_argument(""));
    const auto op = call != nullptr ? static_cast<TopicCall::Op>(call->op()) : TopicCall::Op{};
    // Members send full names: a short one ("orders") is not theirs.
    const bool full = topic.is_ok() && topic->to_string() == call->topic()->string_view();
    if (!full || op < TopicCall::Op::kPrepare || op > TopicCall::Op::kDelete) {
      return reply(encode_counts(Status::invalid_argument("a queue topic call was refused: it does not decode")));
    }
    run_topic_call(service, *topic, {op, call->fresh(), call->stream()},
                   [reply](Result<QueueCounts> r) { reply(encode_counts(r)); });
  });
}

void serve_forwarded_publishes(AmqpService& service, broker::RemoteCalls& calls) {
  calls.handle(kPublishMethod, [&service](std::string_view payload, broker::RemoteCalls::Reply reply) {
    if (service.stopping()) return reply(encode_outcome(Status::unavailable("this member is stopping"), false));
    std::string why;
    auto p = decode_publish(service, payload, &why);
    if (!p) return reply(encode_outcome(Status::invalid_argument("a forwarded publish was refused: " + why), false));
    AmqpMetrics::get().forwarded_in.inc();
    std::vector<RoutedCopy> copies = p->copies;
    store_here(service, std::move(p), std::move(copies),
               [reply](Status st, bool rejected) { reply(encode_outcome(st, rejected)); });
  });
}

}  // namespace

void on_topic_owner(AmqpService& service, const broker::TopicName& topic, TopicCall call, CountsDone done) {
  broker::Ownership* ownership = service.broker().ownership();
  broker::RemoteCalls* calls = service.broker().remote_calls();
  if (ownership == nullptr || calls == nullptr) return run_topic_call(service, topic, call, std::move(done));
  auto at = [&service, calls, topic, call, done](Result<broker::NodeEndpoints> owner) {
    if (!owner.is_ok()) return done(owner.status());
    if (owner->here) return run_topic_call(service, topic, call, done);
    flatbuffers::FlatBufferBuilder b(128);
    auto name = b.CreateString(topic.to_string());
    b.Finish(fb::CreateTopicCall(b, 1, name, static_cast<uint8_t>(call.op), call.fresh, call.stream));
    calls->call(owner->node, kTopicMethod, cluster::record_bytes(b), [done](Result<std::string> r) {
      if (!r.is_ok()) return done(r.status());
      const auto* reply = cluster::verified_record<fb::TopicCallReply>(*r);
      if (reply == nullptr) return done(Status::internal("a member answered a queue topic call unreadably"));
      if (reply->code() != 0) {
        return done(Status(static_cast<common::ErrorCode>(reply->code()),
                           reply->message() != nullptr ? reply->message()->str() : std::string()));
      }
      done(QueueCounts{reply->messages(), reply->consumers()});
    });
  };
  if (auto owner = ownership->known_owner(topic)) return at(*owner);
  ownership->owner_of(topic, std::move(at));
}

Status consume_here_refused(AmqpService& service, const broker::TopicName& topic, Status st) {
  if (st.code() != common::ErrorCode::kWrongNode) return st;
  broker::Ownership* ownership = service.broker().ownership();
  auto owner = ownership != nullptr ? ownership->known_owner(topic) : std::nullopt;
  if (!owner || owner->here) return st;
  return Status(st.code(), fmt::format("queue topic {} is on cluster member {}: consume from it there ({}); "
                                       "publishing works through any member",
                                       topic.to_string(), owner->node,
                                       owner->amqp_url.empty() ? "no AMQP listener" : owner->amqp_url));
}

void serve_cluster_calls(AmqpService& service, broker::RemoteCalls& calls) {
  serve_forwarded_publishes(service, calls);
  serve_topic_calls(service, calls);
}

void store_here(AmqpService& service, std::shared_ptr<const Publication> p, std::vector<RoutedCopy> copies,
                StoredCallback done) {
  if (copies.empty()) return done(Status::ok(), false);
  std::vector<broker::TopicName> topics;
  std::vector<QueueRef> bounded;  // queues that drop their oldest past their length: trimmed before the confirm
  std::vector<QueueRef> gated;    // queues that refuse a message past their length (x-overflow reject-publish)
  service.read(p->vhost, [&](const Topology& t) {
    for (const RoutedCopy& c : copies) {
      auto topic = AmqpService::queue_topic(p->vhost, c.queue, c.level);
      if (!topic) continue;  // queue names were checked when declared
      const QueueDef* q = t.queue(c.queue);
      if (q != nullptr && q->parsed.bounded()) {
        QueueRef ref{p->vhost, c.queue, q->parsed, q->auto_delete};
        if (q->parsed.rejects_overflow()) {
          gated.push_back(std::move(ref));  // takes the message only when it fits: not in `topics`
          continue;
        }
        bounded.push_back(std::move(ref));
      }
      topics.push_back(*topic);
    }
  });
  auto& broker = service.broker();
  std::function<void(Status)> stored = [done](Status st) { done(st, false); };
  if (!gated.empty()) {
    // The copies to gated queues and the rest, settled together.
    auto outcomes = std::make_shared<Outcomes>(gated.size() + 1, std::move(done));
    stored = [outcomes](Status st) { outcomes->part(st, false); };
    for (const QueueRef& q : gated) {
      broker.with_topic(*AmqpService::queue_topic(q.vhost, q.name),
                        [&service, q, p, outcomes](Result<broker::Topic*> t) {
                          if (!t.is_ok()) return outcomes->part(t.status(), false);
                          admit_or_reject(service, **t, q, p->entry, p->message, p->producer_id, p->producer_name,
                                          p->client, [outcomes](Status st, bool rejected) {
                                            outcomes->part(st, rejected);
                                          });
                        });
    }
  }
  if (bounded.empty()) {
    // The marks live in the publication (no allocation of their own).
    auto marks = p->timed && gated.empty() ? std::shared_ptr<broker::PublishStages::Marks>(p, &p->marks) : nullptr;
    return append_copies(broker, topics, p->entry, p->producer_id, p->producer_name, p->client, std::move(stored),
                         std::move(marks));
  }
  // Queues over their length drop their oldest messages before the
  // publisher hears the message is stored.
  append_copies(broker, topics, p->entry, p->producer_id, p->producer_name, p->client,
                [&service, bounded = std::move(bounded), stored](Status st) {
                  auto left = std::make_shared<std::atomic<size_t>>(bounded.size());
                  for (const QueueRef& q : bounded) {
                    auto topic = AmqpService::queue_topic(q.vhost, q.name);
                    service.broker().with_topic(*topic, [&service, q, left, st, stored](Result<broker::Topic*> t) {
                      auto one = [left, st, stored]() {
                        if (left->fetch_sub(1) == 1) stored(st);
                      };
                      if (!t.is_ok()) return one();
                      sweep(service, **t, q, one);
                    });
                  }
                });
}

void store_publication(AmqpService& service, std::shared_ptr<const Publication> p, StoredCallback done) {
  broker::Ownership* ownership = service.broker().ownership();
  broker::RemoteCalls* calls = service.broker().remote_calls();
  if (ownership == nullptr || calls == nullptr || p->copies.empty()) {
    return store_here(service, p, p->copies, std::move(done));
  }
  // Where each copy goes: owners known here at once, the rest asked for
  // (which assigns a bundle nobody owns yet).
  struct Split {
    std::mutex mu;
    size_t left = 0;
    Status failed;
    std::vector<RoutedCopy> here;
    std::map<uint64_t, std::vector<RoutedCopy>> elsewhere;
  };
  auto split = std::make_shared<Split>();
  split->left = p->copies.size();
  auto placed = [&service, calls, p, split, done](const RoutedCopy& c, Result<broker::NodeEndpoints> owner) {
    std::unique_lock lock(split->mu);
    if (!owner.is_ok()) {
      if (split->failed.is_ok()) split->failed = owner.status();
    } else if (owner->here) {
      split->here.push_back(c);
    } else {
      split->elsewhere[owner->node].push_back(c);
    }
    if (--split->left > 0) return;
    lock.unlock();
    // Nothing is stored unless every copy has somewhere to go.
    if (!split->failed.is_ok()) return done(split->failed, false);
    const size_t parts = (split->here.empty() ? 0 : 1) + split->elsewhere.size();
    auto outcomes = std::make_shared<Outcomes>(parts, done);
    auto part = [outcomes](Status st, bool rejected) { outcomes->part(st, rejected); };
    if (!split->elsewhere.empty()) AmqpMetrics::get().forwarded_out.inc();
    for (const auto& [node, copies] : split->elsewhere) forward(*calls, node, *p, copies, part);
    if (!split->here.empty()) store_here(service, p, std::move(split->here), part);
  };
  for (const RoutedCopy& c : p->copies) {
    auto topic = AmqpService::queue_topic(p->vhost, c.queue, c.level);
    if (!topic) {
      placed(c, topic.status());
      continue;
    }
    if (auto owner = ownership->known_owner(*topic)) {
      placed(c, *owner);
      continue;
    }
    ownership->owner_of(*topic, [placed, c](Result<broker::NodeEndpoints> owner) { placed(c, std::move(owner)); });
  }
}

}  // namespace magnetar::protocol::amqp
