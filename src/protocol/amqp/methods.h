// AMQP 0-9-1 methods as data: each class's methods are a table of fields
// (name, type), and one generic codec reads and writes any of them. Adding a
// method is a table edit (methods.cc), not a new codec.
//
// A method frame's payload is class-id (2) | method-id (2) | arguments in
// table order. Consecutive bit fields share octets, the first in the lowest
// bit, up to eight per octet.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/bytes.h"
#include "common/result.h"
#include "protocol/amqp/wire.h"

namespace magnetar::protocol::amqp {

enum class ArgType { kOctet, kShort, kLong, kLongLong, kShortStr, kLongStr, kBit, kTimestamp, kTable };

struct ArgSpec {
  std::string_view name;
  ArgType type;
};

struct MethodSpec {
  uint16_t class_id;
  uint16_t method_id;
  std::string_view name;  // "basic.publish"
  std::vector<ArgSpec> args;
  bool has_content = false;  // followed by a content header and body frames
  // Index of the argument named `name`; REQUIRES: it exists (tables are ours).
  size_t index_of(std::string_view name) const;
};

// Class ids.
inline constexpr uint16_t kConnection = 10;
inline constexpr uint16_t kChannel = 20;
inline constexpr uint16_t kExchange = 40;
inline constexpr uint16_t kQueue = 50;
inline constexpr uint16_t kBasic = 60;
inline constexpr uint16_t kConfirm = 85;
inline constexpr uint16_t kTx = 90;

// (class, method) as one number, for switches: class << 16 | method.
constexpr uint32_t method_key(uint16_t class_id, uint16_t method_id) {
  return (uint32_t{class_id} << 16) | method_id;
}

// Every method we know, by key.
namespace m {
inline constexpr uint32_t kConnectionStart = method_key(10, 10);
inline constexpr uint32_t kConnectionStartOk = method_key(10, 11);
inline constexpr uint32_t kConnectionSecure = method_key(10, 20);
inline constexpr uint32_t kConnectionSecureOk = method_key(10, 21);
inline constexpr uint32_t kConnectionTune = method_key(10, 30);
inline constexpr uint32_t kConnectionTuneOk = method_key(10, 31);
inline constexpr uint32_t kConnectionOpen = method_key(10, 40);
inline constexpr uint32_t kConnectionOpenOk = method_key(10, 41);
inline constexpr uint32_t kConnectionClose = method_key(10, 50);
inline constexpr uint32_t kConnectionCloseOk = method_key(10, 51);
inline constexpr uint32_t kConnectionBlocked = method_key(10, 60);
inline constexpr uint32_t kConnectionUnblocked = method_key(10, 61);
inline constexpr uint32_t kChannelOpen = method_key(20, 10);
inline constexpr uint32_t kChannelOpenOk = method_key(20, 11);
inline constexpr uint32_t kChannelFlow = method_key(20, 20);
inline constexpr uint32_t kChannelFlowOk = method_key(20, 21);
inline constexpr uint32_t kChannelClose = method_key(20, 40);
inline constexpr uint32_t kChannelCloseOk = method_key(20, 41);
inline constexpr uint32_t kExchangeDeclare = method_key(40, 10);
inline constexpr uint32_t kExchangeDeclareOk = method_key(40, 11);
inline constexpr uint32_t kExchangeDelete = method_key(40, 20);
inline constexpr uint32_t kExchangeDeleteOk = method_key(40, 21);
inline constexpr uint32_t kExchangeBind = method_key(40, 30);
inline constexpr uint32_t kExchangeBindOk = method_key(40, 31);
inline constexpr uint32_t kExchangeUnbind = method_key(40, 40);
inline constexpr uint32_t kExchangeUnbindOk = method_key(40, 51);
inline constexpr uint32_t kQueueDeclare = method_key(50, 10);
inline constexpr uint32_t kQueueDeclareOk = method_key(50, 11);
inline constexpr uint32_t kQueueBind = method_key(50, 20);
inline constexpr uint32_t kQueueBindOk = method_key(50, 21);
inline constexpr uint32_t kQueuePurge = method_key(50, 30);
inline constexpr uint32_t kQueuePurgeOk = method_key(50, 31);
inline constexpr uint32_t kQueueDelete = method_key(50, 40);
inline constexpr uint32_t kQueueDeleteOk = method_key(50, 41);
inline constexpr uint32_t kQueueUnbind = method_key(50, 50);
inline constexpr uint32_t kQueueUnbindOk = method_key(50, 51);
inline constexpr uint32_t kBasicQos = method_key(60, 10);
inline constexpr uint32_t kBasicQosOk = method_key(60, 11);
inline constexpr uint32_t kBasicConsume = method_key(60, 20);
inline constexpr uint32_t kBasicConsumeOk = method_key(60, 21);
inline constexpr uint32_t kBasicCancel = method_key(60, 30);
inline constexpr uint32_t kBasicCancelOk = method_key(60, 31);
inline constexpr uint32_t kBasicPublish = method_key(60, 40);
inline constexpr uint32_t kBasicReturn = method_key(60, 50);
inline constexpr uint32_t kBasicDeliver = method_key(60, 60);
inline constexpr uint32_t kBasicGet = method_key(60, 70);
inline constexpr uint32_t kBasicGetOk = method_key(60, 71);
inline constexpr uint32_t kBasicGetEmpty = method_key(60, 72);
inline constexpr uint32_t kBasicAck = method_key(60, 80);
inline constexpr uint32_t kBasicReject = method_key(60, 90);
inline constexpr uint32_t kBasicRecoverAsync = method_key(60, 100);
inline constexpr uint32_t kBasicRecover = method_key(60, 110);
inline constexpr uint32_t kBasicRecoverOk = method_key(60, 111);
inline constexpr uint32_t kBasicNack = method_key(60, 120);
inline constexpr uint32_t kConfirmSelect = method_key(85, 10);
inline constexpr uint32_t kConfirmSelectOk = method_key(85, 11);
inline constexpr uint32_t kTxSelect = method_key(90, 10);
inline constexpr uint32_t kTxSelectOk = method_key(90, 11);
inline constexpr uint32_t kTxCommit = method_key(90, 20);
inline constexpr uint32_t kTxCommitOk = method_key(90, 21);
inline constexpr uint32_t kTxRollback = method_key(90, 30);
inline constexpr uint32_t kTxRollbackOk = method_key(90, 31);
}  // namespace m

// The method with this key, or null.
const MethodSpec* find_method(uint32_t key);
// Whether any method of class `class_id` is known (an unknown class and an
// unknown method of a known class are different errors: 503 vs 540).
bool known_class(uint16_t class_id);

// An argument's value: integers (and bits) as uint64, strings, tables.
using ArgValue = std::variant<uint64_t, std::string, FieldTable>;

// One decoded (or to-be-encoded) method. Accessors name arguments; naming
// one the method lacks is a programming error (asserted).
struct Method {
  const MethodSpec* spec = nullptr;
  std::vector<ArgValue> args;

  Method() = default;
  explicit Method(const MethodSpec& s);
  // A method of the table with every argument zero or empty.
  static Method of(uint32_t key);

  uint32_t key() const { return method_key(spec->class_id, spec->method_id); }
  uint64_t u(std::string_view name) const;
  bool flag(std::string_view name) const { return u(name) != 0; }
  const std::string& str(std::string_view name) const;
  const FieldTable& table(std::string_view name) const;

  Method& set(std::string_view name, uint64_t v);
  Method& set(std::string_view name, std::string v);
  Method& set(std::string_view name, FieldTable v);
};

// Decodes a method frame's payload. kInvalidArgument (with the reader's
// reason) for a truncated or malformed one, or one with bytes left over;
// kNotFound for an unknown class or method (the message names which).
common::Result<Method> decode_method(const common::Slice& payload);
// Appends a method frame's payload.
void encode_method(WireWriter& out, const Method& method);
// Appends a whole method frame on `channel`.
void append_method_frame(WireWriter& out, uint16_t channel, const Method& method);
// A whole method frame on `channel`.
common::Slice method_frame(uint16_t channel, const Method& method);

}  // namespace magnetar::protocol::amqp
