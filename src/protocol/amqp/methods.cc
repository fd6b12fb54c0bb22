#include "protocol/amqp/methods.h"

#include <cassert>
#include <cstdlib>
#include <unordered_map>

#include <fmt/format.h>

#include "protocol/amqp/frame.h"

namespace magnetar::protocol::amqp {

namespace {

using A = ArgType;

// The AMQP 0-9-1 method table (with RabbitMQ's extensions: exchange.bind,
// basic.nack, confirm, connection.blocked). Reserved arguments keep their
// place under the spec's names.
const std::vector<MethodSpec>& methods() {
  static const std::vector<MethodSpec> table = {
      {10, 10, "connection.start",
       {{"version-major", A::kOctet}, {"version-minor", A::kOctet}, {"server-properties", A::kTable},
        {"mechanisms", A::kLongStr}, {"locales", A::kLongStr}}},
      {10, 11, "connection.start-ok",
       {{"client-properties", A::kTable}, {"mechanism", A::kShortStr}, {"response", A::kLongStr},
        {"locale", A::kShortStr}}},
      {10, 20, "connection.secure", {{"challenge", A::kLongStr}}},
      {10, 21, "connection.secure-ok", {{"response", A::kLongStr}}},
      {10, 30, "connection.tune", {{"channel-max", A::kShort}, {"frame-max", A::kLong}, {"heartbeat", A::kShort}}},
      {10, 31, "connection.tune-ok", {{"channel-max", A::kShort}, {"frame-max", A::kLong}, {"heartbeat", A::kShort}}},
      {10, 40, "connection.open",
       {{"virtual-host", A::kShortStr}, {"reserved-1", A::kShortStr}, {"reserved-2", A::kBit}}},
      {10, 41, "connection.open-ok", {{"reserved-1", A::kShortStr}}},
      {10, 50, "connection.close",
       {{"reply-code", A::kShort}, {"reply-text", A::kShortStr}, {"class-id", A::kShort}, {"method-id", A::kShort}}},
      {10, 51, "connection.close-ok", {}},
      {10, 60, "connection.blocked", {{"reason", A::kShortStr}}},
      {10, 61, "connection.unblocked", {}},
      {20, 10, "channel.open", {{"reserved-1", A::kShortStr}}},
      {20, 11, "channel.open-ok", {{"reserved-1", A::kLongStr}}},
      {20, 20, "channel.flow", {{"active", A::kBit}}},
      {20, 21, "channel.flow-ok", {{"active", A::kBit}}},
      {20, 40, "channel.close",
       {{"reply-code", A::kShort}, {"reply-text", A::kShortStr}, {"class-id", A::kShort}, {"method-id", A::kShort}}},
      {20, 41, "channel.close-ok", {}},
      {40, 10, "exchange.declare",
       {{"reserved-1", A::kShort}, {"exchange", A::kShortStr}, {"type", A::kShortStr}, {"passive", A::kBit},
        {"durable", A::kBit}, {"auto-delete", A::kBit}, {"internal", A::kBit}, {"no-wait", A::kBit},
        {"arguments", A::kTable}}},
      {40, 11, "exchange.declare-ok", {}},
      {40, 20, "exchange.delete",
       {{"reserved-1", A::kShort}, {"exchange", A::kShortStr}, {"if-unused", A::kBit}, {"no-wait", A::kBit}}},
      {40, 21, "exchange.delete-ok", {}},
      {40, 30, "exchange.bind",
       {{"reserved-1", A::kShort}, {"destination", A::kShortStr}, {"source", A::kShortStr},
        {"routing-key", A::kShortStr}, {"no-wait", A::kBit}, {"arguments", A::kTable}}},
      {40, 31, "exchange.bind-ok", {}},
      {40, 40, "exchange.unbind",
       {{"reserved-1", A::kShort}, {"destination", A::kShortStr}, {"source", A::kShortStr},
        {"routing-key", A::kShortStr}, {"no-wait", A::kBit}, {"arguments", A::kTable}}},
      {40, 51, "exchange.unbind-ok", {}},
      {50, 10, "queue.declare",
       {{"reserved-1", A::kShort}, {"queue", A::kShortStr}, {"passive", A::kBit}, {"durable", A::kBit},
        {"exclusive", A::kBit}, {"auto-delete", A::kBit}, {"no-wait", A::kBit}, {"arguments", A::kTable}}},
      {50, 11, "queue.declare-ok",
       {{"queue", A::kShortStr}, {"message-count", A::kLong}, {"consumer-count", A::kLong}}},
      {50, 20, "queue.bind",
       {{"reserved-1", A::kShort}, {"queue", A::kShortStr}, {"exchange", A::kShortStr},
        {"routing-key", A::kShortStr}, {"no-wait", A::kBit}, {"arguments", A::kTable}}},
      {50, 21, "queue.bind-ok", {}},
      {50, 30, "queue.purge", {{"reserved-1", A::kShort}, {"queue", A::kShortStr}, {"no-wait", A::kBit}}},
      {50, 31, "queue.purge-ok", {{"message-count", A::kLong}}},
      {50, 40, "queue.delete",
       {{"reserved-1", A::kShort}, {"queue", A::kShortStr}, {"if-unused", A::kBit}, {"if-empty", A::kBit},
        {"no-wait", A::kBit}}},
      {50, 41, "queue.delete-ok", {{"message-count", A::kLong}}},
      {50, 50, "queue.unbind",
       {{"reserved-1", A::kShort}, {"queue", A::kShortStr}, {"exchange", A::kShortStr},
        {"routing-key", A::kShortStr}, {"arguments", A::kTable}}},
      {50, 51, "queue.unbind-ok", {}},
      {60, 10, "basic.qos", {{"prefetch-size", A::kLong}, {"prefetch-count", A::kShort}, {"global", A::kBit}}},
      {60, 11, "basic.qos-ok", {}},
      {60, 20, "basic.consume",
       {{"reserved-1", A::kShort}, {"queue", A::kShortStr}, {"consumer-tag", A::kShortStr}, {"no-local", A::kBit},
        {"no-ack", A::kBit}, {"exclusive", A::kBit}, {"no-wait", A::kBit}, {"arguments", A::kTable}}},
      {60, 21, "basic.consume-ok", {{"consumer-tag", A::kShortStr}}},
      {60, 30, "basic.cancel", {{"consumer-tag", A::kShortStr}, {"no-wait", A::kBit}}},
      {60, 31, "basic.cancel-ok", {{"consumer-tag", A::kShortStr}}},
      {60, 40, "basic.publish",
       {{"reserved-1", A::kShort}, {"exchange", A::kShortStr}, {"routing-key", A::kShortStr},
        {"mandatory", A::kBit}, {"immediate", A::kBit}},
       true},
      {60, 50, "basic.return",
       {{"reply-code", A::kShort}, {"reply-text", A::kShortStr}, {"exchange", A::kShortStr},
        {"routing-key", A::kShortStr}},
       true},
      {60, 60, "basic.deliver",
       {{"consumer-tag", A::kShortStr}, {"delivery-tag", A::kLongLong}, {"redelivered", A::kBit},
        {"exchange", A::kShortStr}, {"routing-key", A::kShortStr}},
       true},
      {60, 70, "basic.get", {{"reserved-1", A::kShort}, {"queue", A::kShortStr}, {"no-ack", A::kBit}}},
      {60, 71, "basic.get-ok",
       {{"delivery-tag", A::kLongLong}, {"redelivered", A::kBit}, {"exchange", A::kShortStr},
        {"routing-key", A::kShortStr}, {"message-count", A::kLong}},
       true},
      {60, 72, "basic.get-empty", {{"reserved-1", A::kShortStr}}},
      {60, 80, "basic.ack", {{"delivery-tag", A::kLongLong}, {"multiple", A::kBit}}},
      {60, 90, "basic.reject", {{"delivery-tag", A::kLongLong}, {"requeue", A::kBit}}},
      {60, 100, "basic.recover-async", {{"requeue", A::kBit}}},
      {60, 110, "basic.recover", {{"requeue", A::kBit}}},
      {60, 111, "basic.recover-ok", {}},
      {60, 120, "basic.nack", {{"delivery-tag", A::kLongLong}, {"multiple", A::kBit}, {"requeue", A::kBit}}},
      {85, 10, "confirm.select", {{"no-wait", A::kBit}}},
      {85, 11, "confirm.select-ok", {}},
      {90, 10, "tx.select", {}},
      {90, 11, "tx.select-ok", {}},
      {90, 20, "tx.commit", {}},
      {90, 21, "tx.commit-ok", {}},
      {90, 30, "tx.rollback", {}},
      {90, 31, "tx.rollback-ok", {}},
  };
  return table;
}

const std::unordered_map<uint32_t, const MethodSpec*>& index() {
  static const auto by_key = [] {
    std::unordered_map<uint32_t, const MethodSpec*> m;
    for (const auto& s : methods()) m[method_key(s.class_id, s.method_id)] = &s;
    return m;
  }();
  return by_key;
}

const FieldTable kNoTable;
const std::string kNoString;

}  // namespace

size_t MethodSpec::index_of(std::string_view arg) const {
  for (size_t k = 0; k < args.size(); ++k) {
    if (args[k].name == arg) return k;
  }
  assert(false && "no such argument in the method");
  std::abort();
}

const MethodSpec* find_method(uint32_t key) {
  auto it = index().find(key);
  return it == index().end() ? nullptr : it->second;
}

bool known_class(uint16_t class_id) {
  switch (class_id) {
    case kConnection: case kChannel: case kExchange: case kQueue: case kBasic: case kConfirm: case kTx: return true;
    default: return false;
  }
}

Method::Method(const MethodSpec& s) : spec(&s) {
  args.reserve(s.args.size());
  for (const auto& a : s.args) {
    switch (a.type) {
      case A::kShortStr:
      case A::kLongStr: args.emplace_back(std::string()); break;
      case A::kTable: args.emplace_back(FieldTable()); break;
      default: args.emplace_back(uint64_t{0});
    }
  }
}

Method Method::of(uint32_t key) {
  const MethodSpec* s = find_method(key);
  assert(s != nullptr && "no such method in the table");
  return Method(*s);
}

uint64_t Method::u(std::string_view name) const {
  const auto* v = std::get_if<uint64_t>(&args[spec->index_of(name)]);
  return v ? *v : 0;
}

const std::string& Method::str(std::string_view name) const {
  const auto* v = std::get_if<std::string>(&args[spec->index_of(name)]);
  return v ? *v : kNoString;
}

const FieldTable& Method::table(std::string_view name) const {
  const auto* v = std::get_if<FieldTable>(&args[spec->index_of(name)]);
  return v ? *v : kNoTable;
}

Method& Method::set(std::string_view name, uint64_t v) {
  args[spec->index_of(name)] = v;
  return *this;
}

Method& Method::set(std::string_view name, std::string v) {
  args[spec->index_of(name)] = std::move(v);
  return *this;
}

Method& Method::set(std::string_view name, FieldTable v) {
  args[spec->index_of(name)] = std::move(v);
  return *this;
}

common::Result<Method> decode_method(const common::Slice& payload) {
  WireReader in(payload);
  uint16_t class_id = in.u16();
  uint16_t method_id = in.u16();
  if (!in.ok()) return common::Status::invalid_argument("a method frame shorter than its class and method ids");
  const MethodSpec* spec = find_method(method_key(class_id, method_id));
  if (spec == nullptr) {
    return common::Status::not_found(known_class(class_id)
                                         ? fmt::format("unknown method {} of class {}", method_id, class_id)
                                         : fmt::format("unknown class {}", class_id));
  }
  Method method(*spec);
  uint8_t bits = 0;
  int bit = 8;  // bits left in `bits`; 8 means a new octet is due
  for (size_t k = 0; k < spec->args.size() && in.ok(); ++k) {
    const ArgType type = spec->args[k].type;
    if (type != A::kBit) bit = 8;
    switch (type) {
      case A::kOctet: method.args[k] = uint64_t{in.u8()}; break;
      case A::kShort: method.args[k] = uint64_t{in.u16()}; break;
      case A::kLong: method.args[k] = uint64_t{in.u32()}; break;
      case A::kLongLong:
      case A::kTimestamp: method.args[k] = in.u64(); break;
      case A::kShortStr: method.args[k] = in.shortstr(); break;
      case A::kLongStr: method.args[k] = in.longstr(); break;
      case A::kTable: method.args[k] = in.table(); break;
      case A::kBit:
        if (bit == 8) {
          bits = in.u8();
          bit = 0;
        }
        method.args[k] = uint64_t{(bits >> bit) & 1u};
        ++bit;
        break;
    }
  }
  if (!in.ok()) return common::Status::invalid_argument(fmt::format("malformed {}: {}", spec->name, in.status().message()));
  if (in.remaining() != 0) {
    return common::Status::invalid_argument(fmt::format("{} bytes after the arguments of {}", in.remaining(), spec->name));
  }
  return method;
}

void encode_method(WireWriter& out, const Method& method) {
  const MethodSpec& spec = *method.spec;
  out.u16(spec.class_id);
  out.u16(spec.method_id);
  uint8_t bits = 0;
  int bit = 0;  // bits gathered in `bits`
  auto flush_bits = [&]() {
    if (bit > 0) out.u8(bits);
    bits = 0;
    bit = 0;
  };
  for (size_t k = 0; k < spec.args.size(); ++k) {
    const ArgType type = spec.args[k].type;
    const ArgValue& v = method.args[k];
    if (type != A::kBit || bit == 8) flush_bits();
    switch (type) {
      case A::kOctet: out.u8(static_cast<uint8_t>(std::get<uint64_t>(v))); break;
      case A::kShort: out.u16(static_cast<uint16_t>(std::get<uint64_t>(v))); break;
      case A::kLong: out.u32(static_cast<uint32_t>(std::get<uint64_t>(v))); break;
      case A::kLongLong:
      case A::kTimestamp: out.u64(std::get<uint64_t>(v)); break;
      case A::kShortStr: out.shortstr(std::get<std::string>(v)); break;
      case A::kLongStr: out.longstr(std::get<std::string>(v)); break;
      case A::kTable: out.table(std::get<FieldTable>(v)); break;
      case A::kBit:
        if (std::get<uint64_t>(v) != 0) bits |= static_cast<uint8_t>(1u << bit);
        ++bit;
        break;
    }
  }
  flush_bits();
}

void append_method_frame(WireWriter& out, uint16_t channel, const Method& method) {
  out.u8(static_cast<uint8_t>(FrameType::kMethod));
  out.u16(channel);
  size_t at = out.skip(4);
  encode_method(out, method);
  out.patch_u32(at, static_cast<uint32_t>(out.size() - at - 4));
  out.u8(kFrameEnd);
}

common::Slice method_frame(uint16_t channel, const Method& method) {
  WireWriter out(128);
  append_method_frame(out, channel, method);
  return out.finish();
}

}  // namespace magnetar::protocol::amqp
