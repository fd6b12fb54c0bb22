#include "protocol/kafka/server/remote_offsets.h"

#include "broker/broker_service.h"
#include "broker/ownership.h"
#include "cluster/rpc_format.h"
#include "protocol/kafka/server/group_offsets.h"
#include "protocol/kafka/server/kafka_service.h"

namespace magnetar::protocol::kafka {

namespace {

constexpr auto kMethod = static_cast<uint16_t>(cluster::rpc::Method::kKafkaGroupOffset);

struct OffsetCall {
  OffsetOp op = OffsetOp::kFetch;
  int64_t offset = 0;
  int32_t partition = 0;
  std::string ns;
  std::string topic;
  std::string group;
};

void put_be(std::string& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; i--) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

bool take_be(std::string_view& in, int bytes, uint64_t& v) {
  if (in.size() < static_cast<size_t>(bytes)) return false;
  v = 0;
  for (int i = 0; i < bytes; i++) v = (v << 8) | static_cast<uint8_t>(in[i]);
  in.remove_prefix(bytes);
  return true;
}

bool take_string(std::string_view& in, std::string& s) {
  uint64_t length = 0;
  if (!take_be(in, 2, length) || in.size() < length) return false;
  s.assign(in.data(), length);
  in.remove_prefix(length);
  return true;
}

std::string encode_call(const OffsetCall& call) {
  std::string out;
  out.push_back(static_cast<char>(call.op));
  put_be(out, static_cast<uint64_t>(call.offset), 8);
  put_be(out, static_cast<uint32_t>(call.partition), 4);
  for (const std::string* s : {&call.ns, &call.topic, &call.group}) {
    put_be(out, s->size(), 2);
    out += *s;
  }
  return out;
}

bool decode_call(std::string_view in, OffsetCall& call) {
  if (in.empty()) return false;
  call.op = static_cast<OffsetOp>(in[0]);
  if (call.op != OffsetOp::kCommit && call.op != OffsetOp::kFetch) return false;
  in.remove_prefix(1);
  uint64_t offset = 0;
  uint64_t partition = 0;
  if (!take_be(in, 8, offset) || !take_be(in, 4, partition)) return false;
  call.offset = static_cast<int64_t>(offset);
  call.partition = static_cast<int32_t>(partition);
  return take_string(in, call.ns) && take_string(in, call.topic) && take_string(in, call.group) && in.empty();
}

std::string encode_reply(ErrorCode error, int64_t aligned) {
  std::string out;
  put_be(out, static_cast<uint16_t>(error), 2);
  put_be(out, static_cast<uint64_t>(aligned), 8);
  return out;
}

// Runs the call here, on the partition this member owns.
void run_here(KafkaService& service, const broker::NamespaceName& ns, const OffsetCall& call,
              std::function<void(ErrorCode, int64_t)> done) {
  service.with_partition(ns, call.topic, call.partition, [call, done](common::Result<broker::Topic*> t) {
    if (!t.is_ok()) return done(error_code(t.status()), -1);
    if (call.op == OffsetOp::kCommit) return commit_group_offset(*t, call.group, call.offset, done);
    fetch_group_offset(*t, call.group, done);
  });
}

}  // namespace

void remote_group_offset(KafkaService& service, const broker::NamespaceName& ns, const std::string& topic,
                         int32_t partition, const std::string& group, OffsetOp op, int64_t offset,
                         std::function<void(ErrorCode, int64_t)> done) {
  broker::Ownership* ownership = service.broker().ownership();
  broker::RemoteCalls* calls = service.broker().remote_calls();
  auto base = service.topic_for(ns, topic);
  if (ownership == nullptr || calls == nullptr || !base) return done(kNotLeaderOrFollower, -1);
  const int32_t partitions = service.known_partitions(*base);
  broker::TopicName target = partitions > 0 ? base->partition_of(partition) : *base;
  OffsetCall call{op, offset, partition, ns.to_string(), topic, group};
  ownership->owner_of(target, [calls, call, done](common::Result<broker::NodeEndpoints> owner) {
    if (!owner.is_ok() || owner->here) return done(kNotLeaderOrFollower, -1);
    calls->call(owner->node, kMethod, encode_call(call), [done](common::Result<std::string> reply) {
      std::string_view in = reply.is_ok() ? std::string_view(*reply) : std::string_view();
      uint64_t error = 0;
      uint64_t aligned = 0;
      if (!reply.is_ok() || !take_be(in, 2, error) || !take_be(in, 8, aligned)) {
        return done(reply.is_ok() || reply.status().code() != common::ErrorCode::kTimeout ? kNotLeaderOrFollower
                                                                                             : kRequestTimedOut,
                    -1);
      }
      done(static_cast<ErrorCode>(static_cast<int16_t>(error)), static_cast<int64_t>(aligned));
    });
  });
}

void serve_remote_group_offsets(KafkaService& service, broker::RemoteCalls& calls) {
  calls.handle(kMethod, [&service](std::string_view payload, broker::RemoteCalls::Reply reply) {
    OffsetCall call;
    if (!decode_call(payload, call)) return reply(encode_reply(kCorruptMessage, -1));
    auto ns = broker::NamespaceName::parse(call.ns);
    if (!ns) return reply(encode_reply(kInvalidTopic, -1));
    run_here(service, *ns, call, [reply](ErrorCode e, int64_t aligned) { reply(encode_reply(e, aligned)); });
  });
}

}  // namespace magnetar::protocol::kafka
