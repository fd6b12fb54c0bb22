// queue.declare, queue.bind, queue.unbind, queue.purge, queue.delete.
// Queue `q` is the topic persistent://tenant/ns/q and its Shared
// subscription "amqp" (amqp_service.h): declaring makes the subscription,
// purging moves its cursor to the end, deleting deletes the topic.
// A stream queue (x-queue-type stream) is the topic alone: each consumer
// reads it with a reader of its own, and the topic keeps its messages for
// the retention its x-max-length-bytes and x-max-age set (its topic
// retention policy; no limit without them).
#include <mutex>
#include <random>

#include <fmt/format.h>

#include "common/clock.h"
#include "common/logging.h"
#include "protocol/amqp/server/amqp_connection.h"
#include "protocol/amqp/server/forwarding.h"

namespace magnetar::protocol::amqp {

using common::Result;
using common::Status;

namespace {

QueueCounts counts_of(broker::Subscription* sub) {
  QueueCounts c;
  if (sub == nullptr) return c;
  auto stats = sub->stats();
  c.messages = stats.backlog_messages > stats.unacked_messages ? stats.backlog_messages - stats.unacked_messages : 0;
  c.consumers = stats.consumers;
  return c;
}

std::optional<QueueArguments> forget(AmqpService& service, const broker::NamespaceName& vhost,
                                     const std::string& name, std::optional<int64_t> unused_since);

// A stream's counts: every message its topic keeps, and its readers.
QueueCounts stream_counts(broker::Topic& topic) {
  return {topic.log().chain().total_messages(), topic.consumer_count()};
}

// Runs `one` for each of a queue's topics (a priority queue has one per
// level) and reports once every one has: their messages summed, the most
// consumers any has (each consumer reads every level), or the first error.
void each_topic(const std::vector<broker::TopicName>& topics,
                const std::function<void(const broker::TopicName&, CountsDone)>& one, CountsDone done) {
  if (topics.size() == 1) return one(topics.front(), std::move(done));
  struct Sum {
    std::mutex mu;
    size_t left = 0;
    QueueCounts counts;
    Status failed;
  };
  auto sum = std::make_shared<Sum>();
  sum->left = topics.size();
  for (const auto& topic : topics) {
    one(topic, [sum, done](Result<QueueCounts> r) {
      std::unique_lock lock(sum->mu);
      if (!r.is_ok()) {
        if (sum->failed.is_ok()) sum->failed = r.status();
      } else {
        sum->counts.messages += r->messages;
        sum->counts.consumers = std::max(sum->counts.consumers, r->consumers);
      }
      if (--sum->left > 0) return;
      lock.unlock();
      done(sum->failed.is_ok() ? Result<QueueCounts>(sum->counts) : Result<QueueCounts>(sum->failed));
    });
  }
}

// On the queue topic's home: creates the topic when new (queue.declare is
// an explicit create: the namespace's autoTopicCreation does not apply, its
// topic counts do), makes sure subscription "amqp" exists (a fresh
// queue starts empty: a subscription left from an earlier queue of the same
// name is replaced) and reports the queue's counts. A stream has no
// subscription of its own: a fresh one drops the one an earlier queue of
// the name left, which would hold its messages past their retention.
void prepare_topic(AmqpService& service, const broker::TopicName& topic, bool fresh, bool stream,
                   std::function<void(Result<QueueCounts>)> done) {
  service.broker().with_topic(topic, [fresh, stream, done](Result<broker::Topic*> t) {
    if (!t.is_ok()) return done(t.status());
    broker::Topic* topic = *t;
    auto alive = topic->liveness();
    if (stream) {
      broker::Subscription* left = topic->subscription(queue_subscription());
      if (!fresh || left == nullptr || left->consumer_count() > 0) return done(stream_counts(*topic));
      return topic->remove_subscription(queue_subscription(), false, [topic, alive, done](Status) {
        if (alive.expired()) return done(Status::unavailable("the queue's topic was unloaded"));
        done(stream_counts(*topic));
      });
    }
    auto create = [topic, alive, done]() {
      topic->create_subscription(queue_subscription(), broker::InitialPosition::kLatest,
                                 [done](Result<broker::Subscription*> s) {
                                   if (!s.is_ok()) return done(s.status());
                                   done(counts_of(*s));
                                 });
    };
    broker::Subscription* sub = topic->subscription(queue_subscription());
    if (sub == nullptr) return create();
    if (!fresh || sub->consumer_count() > 0) return done(counts_of(sub));
    topic->remove_subscription(queue_subscription(), false, [alive, create, done](Status st) {
      if (alive.expired()) return done(Status::unavailable("the queue's topic was unloaded"));
      if (!st.is_ok() && st.code() != common::ErrorCode::kNotFound) return done(st);
      create();
    });
  }, broker::TopicCreation::kExplicit);
}

// A stream's retention from its arguments: sizes and times round up to
// the policy's MB and minutes.
broker::RetentionPolicy stream_retention(const QueueArguments& args) {
  constexpr int64_t kMiB = 1024 * 1024;
  constexpr int64_t kMinuteMs = 60 * 1000;
  broker::RetentionPolicy r;
  r.size_mb = args.stream_max_bytes < 0 ? -1 : (args.stream_max_bytes + kMiB - 1) / kMiB;
  r.time_minutes = args.stream_max_age_ms < 0 ? -1 : (args.stream_max_age_ms + kMinuteMs - 1) / kMinuteMs;
  return r;
}

// Sets a fresh stream's topic retention (on the tenancy thread); `done`
// runs there. Without a metadata service there is no policy to set.
void keep_for(AmqpService& service, const broker::TopicName& topic, broker::RetentionPolicy retention,
              std::function<void(Status)> done) {
  broker::Tenancy* tenancy = service.tenancy();
  if (tenancy == nullptr) return done(Status::ok());
  Status queued = tenancy->submit([tenancy, topic, retention, done]() {
    done(tenancy->update_topic_policies(topic, [&retention](broker::NamespacePolicies& p) {
      p.retention = retention;
      return Status::ok();
    }));
  });
  if (!queued.is_ok()) done(queued);
}

std::string server_named() {
  static thread_local std::mt19937_64 random{std::random_device{}()};
  return fmt::format("amq.gen-{:016x}", random());
}

std::string inequivalent(const QueueDef& have, const QueueDef& want) {
  if (have.durable != want.durable) return "durable";
  if (have.exclusive != want.exclusive) return "exclusive";
  if (have.auto_delete != want.auto_delete) return "auto_delete";
  for (const auto& a : want.arguments) {
    const FieldValue* v = find_field(have.arguments, a.name);
    if (v == nullptr || v->to_text() != a.value.to_text()) return a.name;
  }
  for (const auto& a : have.arguments) {
    if (find_field(want.arguments, a.name) == nullptr) return a.name;
  }
  return {};
}

void answer_declare(AmqpConnection& c, Channel& ch, const Method& m, const std::string& name, QueueCounts counts) {
  Method ok = Method::of(m::kQueueDeclareOk);
  ok.set("queue", name).set("message-count", counts.messages).set("consumer-count", counts.consumers);
  c.answer(ch, m, ok);
}

void declare(AmqpConnection& c, Channel& ch, const Method& m) {
  QueueDef def;
  def.name = m.str("queue").empty() ? server_named() : m.str("queue");
  def.durable = m.flag("durable");
  def.exclusive = m.flag("exclusive");
  def.auto_delete = m.flag("auto-delete");
  def.arguments = m.table("arguments");
  def.owner = def.exclusive ? c.id() : 0;
  def.last_used_ms = common::wall_clock_ms();
  const bool passive = m.flag("passive");
  auto topic = AmqpService::queue_topic(c.vhost(), def.name);
  if (!topic) {
    return c.channel_error(ch, {kPreconditionFailed, fmt::format("queue name '{}' cannot name a topic: {}", def.name,
                                                                 topic.status().message()), m.key()});
  }
  // Declaring a queue makes (or finds) its topic: a role that may
  // produce to it or consume from it may, as a Pulsar client creates a
  // topic on first use.
  if (!c.authorized(ch, *topic, broker::TopicAction::kLookup, m.key())) return;
  if (!passive) {
    auto parsed = parse_queue_arguments(def.arguments);
    if (!parsed) return c.channel_error(ch, {kPreconditionFailed, parsed.status().message(), m.key()});
    def.parsed = *parsed;
    if (def.parsed.stream && (!def.durable || def.exclusive || def.auto_delete)) {
      const char* property = !def.durable ? "non-durable" : def.exclusive ? "exclusive" : "auto-delete";
      return c.channel_error(ch, {kPreconditionFailed, fmt::format("invalid property '{}' for stream queue '{}' in "
                                                                   "vhost '{}': a stream is durable and shared",
                                                                   property, def.name, c.vhost_name()), m.key()});
    }
    if (def.name.rfind("amq.", 0) == 0 && !m.str("queue").empty()) {
      return c.channel_error(ch, {kAccessRefused, fmt::format("queue name '{}' contains reserved prefix 'amq.'",
                                                              def.name), m.key()});
    }
  }
  AmqpError error;
  bool fresh = false;
  QueueArguments args = def.parsed;
  c.service().write(c.vhost(), [&](Topology& t, AmqpService::Persist& persist) {
    const QueueDef* existing = t.queue(def.name);
    if (existing != nullptr) args = existing->parsed;
    if (existing == nullptr) {
      if (passive) {
        error = {kNotFound, fmt::format("no queue '{}' in vhost '{}'", def.name, c.vhost_name()), m.key()};
        return;
      }
      t.put_queue(def);
      persist.save_queue(def);  // transient ones too: deleted at the next start
      fresh = true;
      return;
    }
    // A redeclaration renews x-expires; a passive one only looks.
    if (!passive) t.mutable_queue(def.name)->last_used_ms = def.last_used_ms;
    if (existing->exclusive && existing->owner != c.id()) {
      error = {kResourceLocked, fmt::format("cannot obtain exclusive access to locked queue '{}' in vhost '{}'",
                                            def.name, c.vhost_name()), m.key()};
      return;
    }
    if (passive) return;
    std::string arg = inequivalent(*existing, def);
    if (!arg.empty()) {
      error = {kPreconditionFailed, fmt::format("inequivalent arg '{}' for queue '{}' in vhost '{}'", arg, def.name,
                                                c.vhost_name()), m.key()};
    }
  });
  if (error.code != 0) return c.channel_error(ch, error);
  ch.last_queue = def.name;
  if (fresh && def.exclusive) c.exclusive_queues().insert(def.name);
  if (fresh && has_limits(def.parsed)) c.service().keeper().changed();
  auto answered = [reply = c.replier(ch), m, name = def.name, fresh, passive](Result<QueueCounts> r) {
    reply([m, name, r, fresh, passive](AmqpConnection& conn, Channel& chan) {
      if (!r.is_ok() && passive && r.status().code() == common::ErrorCode::kUnavailable) {
        // The queue went (an auto-delete or x-expires) while this looked:
        // it is not there, as RabbitMQ answers.
        return conn.channel_error(
            chan, {kNotFound, fmt::format("no queue '{}' in vhost '{}'", name, conn.vhost_name()), m.key()});
      }
      if (!r.is_ok()) {
        // A queue whose topic may not be created (a topic count reached) is
        // not declared at all: RabbitMQ's queue limit refuses it with 406.
        if (fresh) {
          forget(conn.service(), conn.vhost(), name, std::nullopt);
          conn.exclusive_queues().erase(name);
        }
        return conn.channel_error(chan, {reply_code(r.status()), r.status().message(), m.key()});
      }
      answer_declare(conn, chan, m, name, *r);
    });
  };
  const bool stream = args.stream;
  each_topic(AmqpService::queue_topics(c.vhost(), def.name, args),
             [&service = c.service(), fresh, stream](const broker::TopicName& t, CountsDone done) {
               on_topic_owner(service, t, {TopicCall::Op::kPrepare, fresh, stream}, std::move(done));
             },
             [&service = c.service(), topic = *topic, retention = stream_retention(args), fresh, stream,
              answered](Result<QueueCounts> r) {
               if (!r.is_ok() || !fresh || !stream) return answered(r);
               keep_for(service, topic, retention, [answered, r](Status st) {
                 answered(st.is_ok() ? r : Result<QueueCounts>(st));
               });
             });
}

void bind(AmqpConnection& c, Channel& ch, const Method& m, bool add) {
  QueueDef q;
  if (!find_queue(c, ch, m.str("queue"), m.key(), &q)) return;
  // A binding routes into the queue: for those who may read it.
  if (!c.authorized(ch, *AmqpService::queue_topic(c.vhost(), q.name), broker::TopicAction::kConsume, m.key())) return;
  Binding b;
  b.source = m.str("exchange");
  b.destination = q.name;
  b.routing_key = m.str("routing-key");
  b.arguments = m.table("arguments");
  change_binding(c, ch, m, std::move(b), add, Method::of(add ? m::kQueueBindOk : m::kQueueUnbindOk));
}

void purge(AmqpConnection& c, Channel& ch, const Method& m) {
  QueueDef q;
  if (!find_queue(c, ch, m.str("queue"), m.key(), &q)) return;
  auto topic = AmqpService::queue_topic(c.vhost(), q.name);
  if (!c.authorized(ch, *topic, broker::TopicAction::kConsume, m.key())) return;
  if (q.parsed.stream) {
    return c.channel_error(ch, {kPreconditionFailed, fmt::format("queue.purge not supported by stream queue '{}' in "
                                                                 "vhost '{}': its retention removes messages",
                                                                 q.name, c.vhost_name()), m.key()});
  }
  each_topic(AmqpService::queue_topics(c.vhost(), q.name, q.parsed),
             [&service = c.service()](const broker::TopicName& name, CountsDone done) {
               on_topic_owner(service, name, {TopicCall::Op::kPurge}, std::move(done));
             },
             [reply = c.replier(ch), m](Result<QueueCounts> r) {
               reply([m, r](AmqpConnection& conn, Channel& chan) {
                 if (!r.is_ok()) return conn.channel_error(chan, {reply_code(r.status()), r.status().message(), m.key()});
                 conn.answer(chan, m, Method::of(m::kQueuePurgeOk).set("message-count", r->messages));
               });
             });
}

// Removes queue `name` from the topology and metadata (with its bindings);
// with `unused_since`, only if nobody used it after that time. Its
// arguments (which say what topics it has), or none when it was not removed.
std::optional<QueueArguments> forget(AmqpService& service, const broker::NamespaceName& vhost,
                                     const std::string& name, std::optional<int64_t> unused_since) {
  std::optional<QueueArguments> removed;
  service.write(vhost, [&](Topology& t, AmqpService::Persist& persist) {
    const QueueDef* q = t.queue(name);
    if (q == nullptr || (unused_since && q->last_used_ms != *unused_since)) return;
    const bool durable = q->durable;
    removed = q->parsed;
    auto bindings = t.remove_queue(name);
    for (const Binding& b : bindings) {
      if (durable) persist.forget_binding(b);
    }
    persist.forget_queue(name);
    drop_unused_auto_delete(t, persist, std::move(bindings));
  });
  if (removed) service.keeper().changed();
  return removed;
}

// On the topic's home: deletes one of the queue's topics, reporting the
// messages it held (a stream's: all it kept), then its policy overrides (a
// stream's retention), so a queue declared again under the name starts
// clean.
void delete_topic(AmqpService& service, const broker::TopicName& topic, CountsDone done) {
  service.broker().with_topic(topic, [&service, topic, done](Result<broker::Topic*> t) {
    if (!t.is_ok()) return done(t.status());
    broker::Subscription* sub = (*t)->subscription(queue_subscription());
    const QueueCounts counts{sub != nullptr ? counts_of(sub).messages : stream_counts(**t).messages, 0};
    service.broker().delete_topic(topic, true, [&service, topic, done, counts](Status st) {
      if (!st.is_ok() && st.code() != common::ErrorCode::kNotFound) return done(st);
      broker::Tenancy* tenancy = service.tenancy();
      if (tenancy == nullptr) return done(counts);
      Status queued = tenancy->submit([tenancy, topic, done, counts]() {
        Status dropped = tenancy->delete_topic_policies(topic);
        if (!dropped.is_ok()) MLOG_WARN("amqp: policies of deleted queue topic {} stay: {}", topic.to_string(),
                                        dropped.to_string());
        done(counts);
      });
      if (!queued.is_ok()) done(counts);
    });
  });
}

// Deletes every topic of a queue with `args`.
void delete_topics(AmqpService& service, const broker::NamespaceName& vhost, const std::string& name,
                   const QueueArguments& args, CountsDone done) {
  each_topic(AmqpService::queue_topics(vhost, name, args),
             [&service](const broker::TopicName& t, CountsDone one) {
               on_topic_owner(service, t, {TopicCall::Op::kDelete}, std::move(one));
             },
             std::move(done));
}

// Removes the queue from the topology (and metadata), then deletes its topics.
void drop(AmqpConnection& c, Channel& ch, const Method& m, const std::string& name, const QueueArguments& args) {
  forget(c.service(), c.vhost(), name, std::nullopt);
  c.exclusive_queues().erase(name);
  delete_topics(c.service(), c.vhost(), name, args, [reply = c.replier(ch), m](Result<QueueCounts> r) {
    reply([m, r](AmqpConnection& conn, Channel& chan) {
      if (!r.is_ok()) return conn.channel_error(chan, {reply_code(r.status()), r.status().message(), m.key()});
      conn.answer(chan, m, Method::of(m::kQueueDeleteOk).set("message-count", r->messages));
    });
  });
}

// queue.delete: if-unused and if-empty are checked on the topic's home
// first, then the queue goes.
void remove(AmqpConnection& c, Channel& ch, const Method& m) {
  const std::string name = m.str("queue").empty() ? ch.last_queue : m.str("queue");
  bool exists = false;
  c.service().read(c.vhost(), [&](const Topology& t) { exists = t.queue(name) != nullptr; });
  if (!exists) return c.answer(ch, m, Method::of(m::kQueueDeleteOk));
  QueueDef q;
  if (!find_queue(c, ch, name, m.key(), &q)) return;
  // A connection's own exclusive queue is its to delete; any other is the
  // tenant admins', as deleting a topic is.
  if (!(q.exclusive && q.owner == c.id()) && !c.authorized_admin(ch, m.key())) return;
  if (!m.flag("if-unused") && !m.flag("if-empty")) return drop(c, ch, m, name, q.parsed);
  each_topic(AmqpService::queue_topics(c.vhost(), name, q.parsed),
             [&service = c.service()](const broker::TopicName& t, CountsDone done) {
               on_topic_owner(service, t, {TopicCall::Op::kCounts}, [done](Result<QueueCounts> r) {
                 done(r.is_ok() ? *r : QueueCounts{});
               });
             },
             [reply = c.replier(ch), m, name, args = q.parsed](Result<QueueCounts> r) {
    const QueueCounts counts = r.is_ok() ? *r : QueueCounts{};
    reply([m, name, counts, args](AmqpConnection& conn, Channel& chan) {
      if (m.flag("if-unused") && counts.consumers > 0) {
        return conn.channel_error(chan, {kPreconditionFailed, fmt::format("queue '{}' in vhost '{}' in use", name,
                                                                          conn.vhost_name()), m.key()});
      }
      if (m.flag("if-empty") && counts.messages > 0) {
        return conn.channel_error(chan, {kPreconditionFailed, fmt::format("queue '{}' in vhost '{}' is not empty",
                                                                          name, conn.vhost_name()), m.key()});
      }
      drop(conn, chan, m, name, args);
    });
  });
}

}  // namespace

bool find_queue(AmqpConnection& c, Channel& ch, const std::string& name, uint32_t key, QueueDef* out) {
  const std::string& wanted = name.empty() ? ch.last_queue : name;
  AmqpError error;
  c.service().read(c.vhost(), [&](const Topology& t) {
    const QueueDef* q = t.queue(wanted);
    if (q == nullptr) {
      error = {kNotFound, fmt::format("no queue '{}' in vhost '{}'", wanted, c.vhost_name()), key};
    } else if (q->exclusive && q->owner != c.id()) {
      error = {kResourceLocked, fmt::format("cannot obtain exclusive access to locked queue '{}' in vhost '{}'",
                                            wanted, c.vhost_name()), key};
    } else {
      *out = *q;
    }
  });
  if (error.code == 0) return true;
  c.channel_error(ch, error);
  return false;
}

void delete_queues(AmqpService& service, const broker::NamespaceName& vhost, const std::vector<std::string>& queues,
                   std::optional<int64_t> unused_since) {
  std::vector<std::pair<std::string, QueueArguments>> gone;
  for (const std::string& name : queues) {
    if (auto args = forget(service, vhost, name, unused_since)) gone.emplace_back(name, *args);
  }
  // At shutdown the topics stay (deleted at the next start, as transient
  // queues are): deleting them would outlive the broker.
  if (service.stopping()) return;
  for (const auto& [name, args] : gone) delete_topics(service, vhost, name, args, [](Result<QueueCounts>) {});
}

void run_topic_call(AmqpService& service, const broker::TopicName& topic, TopicCall call, CountsDone done) {
  auto& broker = service.broker();
  switch (call.op) {
    case TopicCall::Op::kPrepare: return prepare_topic(service, topic, call.fresh, call.stream, std::move(done));
    case TopicCall::Op::kDelete: return delete_topic(service, topic, std::move(done));
    case TopicCall::Op::kCounts:
      return broker.with_topic(topic, [done](Result<broker::Topic*> t) {
        if (!t.is_ok()) return done(t.status());
        done(counts_of((*t)->subscription(queue_subscription())));
      });
    case TopicCall::Op::kPurge:
      return broker.with_topic(topic, [&broker, done](Result<broker::Topic*> t) {
        if (!t.is_ok()) return done(t.status());
        broker::Topic* found = *t;
        broker::Subscription* sub = found->subscription(queue_subscription());
        if (sub == nullptr) return done(QueueCounts{});
        const QueueCounts purged = counts_of(sub);
        found->log().reset_cursor(
            queue_subscription(), found->log().last_confirmed(),
            [done, purged, &broker, name = found->name()](Status st) {
              // The topic may have been unloaded meanwhile: look it up again.
              broker::Topic* now = broker.loaded_topic(name);
              broker::Subscription* again = now ? now->subscription(queue_subscription()) : nullptr;
              if (again != nullptr && st.is_ok()) again->rewind();
              done(st.is_ok() ? Result<QueueCounts>(purged) : Result<QueueCounts>(st));
            });
      });
  }
  done(Status::invalid_argument("unknown queue topic call"));
}

void handle_queue(AmqpConnection& c, Channel& ch, const Method& m) {
  switch (m.key()) {
    case m::kQueueDeclare: return declare(c, ch, m);
    case m::kQueueBind: return bind(c, ch, m, true);
    case m::kQueueUnbind: return bind(c, ch, m, false);
    case m::kQueuePurge: return purge(c, ch, m);
    case m::kQueueDelete: return remove(c, ch, m);
    default:
      return c.connection_error({kCommandInvalid, fmt::format("{} is not a method a client sends", m.spec->name), m.key()});
  }
}

}  // namespace magnetar::protocol::amqp
