// exchange.declare, exchange.delete, exchange.bind, exchange.unbind.
// Exchanges are routing only (server/topology.h); durable ones and bindings
// between durable ends are written to metadata before the answer.
#include <fmt/format.h>

#include "protocol/amqp/server/amqp_connection.h"

namespace magnetar::protocol::amqp {

using common::Status;

namespace {

bool reserved(const std::string& name) { return name.rfind("amq.", 0) == 0; }

void declare_exchange(AmqpConnection& c, Channel& ch, const Method& m) {
  const std::string& name = m.str("exchange");
  auto type = parse_exchange_type(m.str("type"));
  const bool passive = m.flag("passive");
  if (!passive && !type) {
    return c.connection_error({kCommandInvalid, fmt::format("invalid exchange type '{}'", m.str("type")), m.key()});
  }
  // Declaring an exchange is for those who publish in the vhost, as a
  // producer may create a topic; looking one up for anyone who may use it.
  if (!c.authorized_in_vhost(ch, passive ? broker::TopicAction::kLookup : broker::TopicAction::kProduce, m.key())) {
    return;
  }
  ExchangeDef def;
  def.name = name;
  def.type = type ? *type : ExchangeType::kDirect;
  def.durable = m.flag("durable");
  def.auto_delete = m.flag("auto-delete");
  def.internal = m.flag("internal");
  def.arguments = m.table("arguments");
  AmqpError error;
  bool write = false;
  c.service().write(c.vhost(), [&](Topology& t, AmqpService::Persist& persist) {
    const ExchangeDef* existing = t.exchange(name);
    if (existing == nullptr) {
      if (passive) {
        error = {kNotFound, fmt::format("no exchange '{}' in vhost '{}'", name, c.vhost_name()), m.key()};
      } else if (reserved(name) || name.empty()) {
        error = {kAccessRefused, fmt::format("exchange name '{}' contains reserved prefix 'amq.'", name), m.key()};
      } else {
        t.put_exchange(def);
        write = def.durable;
        if (write) {
          persist.save_exchange(def, [reply = c.replier(ch), m](Status st) {
            reply([m, st](AmqpConnection& conn, Channel& chan) {
              if (!st.is_ok()) return conn.channel_error(chan, {kInternalError, st.message(), m.key()});
              conn.answer(chan, m, Method::of(m::kExchangeDeclareOk));
            });
          });
        }
      }
      return;
    }
    if (passive) return;
    if (existing->type != def.type) {
      error = {kPreconditionFailed,
               fmt::format("inequivalent arg 'type' for exchange '{}' in vhost '{}': received '{}' but current is '{}'",
                           name, c.vhost_name(), exchange_type_name(def.type), exchange_type_name(existing->type)),
               m.key()};
    } else if (existing->durable != def.durable && !existing->builtin) {
      error = {kPreconditionFailed,
               fmt::format("inequivalent arg 'durable' for exchange '{}' in vhost '{}'", name, c.vhost_name()), m.key()};
    }
  });
  if (error.code != 0) return c.channel_error(ch, error);
  if (!write) c.answer(ch, m, Method::of(m::kExchangeDeclareOk));
}

void delete_exchange(AmqpConnection& c, Channel& ch, const Method& m) {
  const std::string& name = m.str("exchange");
  // Others' routing depends on it: deleting is the tenant admins' call, as
  // deleting a topic is.
  if (!c.authorized_admin(ch, m.key())) return;
  AmqpError error;
  c.service().write(c.vhost(), [&](Topology& t, AmqpService::Persist& persist) {
    const ExchangeDef* e = t.exchange(name);
    if (e == nullptr) return;  // deleting what is not there is done
    if (e->builtin) {
      error = {kAccessRefused, fmt::format("exchange '{}' cannot be deleted", name), m.key()};
      return;
    }
    if (m.flag("if-unused")) {
      for (const Binding& b : t.bindings()) {
        if (b.source == name) {
          error = {kPreconditionFailed, fmt::format("exchange '{}' in vhost '{}' in use", name, c.vhost_name()), m.key()};
          return;
        }
      }
    }
    bool durable = e->durable;
    auto removed = t.remove_exchange(name);
    for (const Binding& b : removed) persist.forget_binding(b);
    if (durable) persist.forget_exchange(name);
    drop_unused_auto_delete(t, persist, std::move(removed));
  });
  if (error.code != 0) return c.channel_error(ch, error);
  c.answer(ch, m, Method::of(m::kExchangeDeleteOk));
}

void bind_exchange(AmqpConnection& c, Channel& ch, const Method& m, bool add) {
  if (!c.authorized_in_vhost(ch, broker::TopicAction::kProduce, m.key())) return;
  Binding b;
  b.source = m.str("source");
  b.to_exchange = true;
  b.destination = m.str("destination");
  b.routing_key = m.str("routing-key");
  b.arguments = m.table("arguments");
  change_binding(c, ch, m, std::move(b), add, Method::of(add ? m::kExchangeBindOk : m::kExchangeUnbindOk));
}

}  // namespace

void drop_unused_auto_delete(Topology& t, AmqpService::Persist& persist, std::vector<Binding> removed) {
  auto [exchanges, bindings] = t.drop_unused_auto_delete(std::move(removed));
  for (const Binding& b : bindings) persist.forget_binding(b);
  for (const ExchangeDef& e : exchanges) {
    if (e.durable) persist.forget_exchange(e.name);
  }
}

void change_binding(AmqpConnection& c, Channel& ch, const Method& m, Binding b, bool add, const Method& reply) {
  AmqpError error;
  bool write = false;
  c.service().write(c.vhost(), [&](Topology& t, AmqpService::Persist& persist) {
    const ExchangeDef* source = t.exchange(b.source);
    const ExchangeDef* to_exchange = b.to_exchange ? t.exchange(b.destination) : nullptr;
    const QueueDef* to_queue = b.to_exchange ? nullptr : t.queue(b.destination);
    if (source == nullptr || (b.to_exchange && to_exchange == nullptr)) {
      const std::string& missing = source == nullptr ? b.source : b.destination;
      error = {kNotFound, fmt::format("no exchange '{}' in vhost '{}'", missing, c.vhost_name()), m.key()};
      return;
    }
    if (!b.to_exchange && to_queue == nullptr) {
      error = {kNotFound, fmt::format("no queue '{}' in vhost '{}'", b.destination, c.vhost_name()), m.key()};
      return;
    }
    if (b.source.empty() || (b.to_exchange && b.destination.empty())) {
      error = {kAccessRefused, "the default exchange cannot be bound", m.key()};
      return;
    }
    const bool durable = source->durable && (b.to_exchange ? to_exchange->durable : to_queue->durable);
    if (!add) {
      if (!t.remove_binding(b)) return;
      if (durable) persist.forget_binding(b);
      drop_unused_auto_delete(t, persist, {b});
      return;
    }
    if (!t.add_binding(b) || !durable) return;
    write = true;
    persist.save_binding(b, [reply_to = c.replier(ch), m, reply](Status st) {
      reply_to([m, reply, st](AmqpConnection& conn, Channel& chan) {
        if (!st.is_ok()) return conn.channel_error(chan, {kInternalError, st.message(), m.key()});
        conn.answer(chan, m, reply);
      });
    });
  });
  if (error.code != 0) return c.channel_error(ch, error);
  if (!write) c.answer(ch, m, reply);
}

void handle_exchange(AmqpConnection& c, Channel& ch, const Method& m) {
  switch (m.key()) {
    case m::kExchangeDeclare: return declare_exchange(c, ch, m);
    case m::kExchangeDelete: return delete_exchange(c, ch, m);
    case m::kExchangeBind: return bind_exchange(c, ch, m, true);
    case m::kExchangeUnbind: return bind_exchange(c, ch, m, false);
    default:
      return c.connection_error({kCommandInvalid, fmt::format("{} is not a method a client sends", m.spec->name), m.key()});
  }
}

}  // namespace magnetar::protocol::amqp
