// The frames of the cluster port's RPC channel, defined once for both sides.
//
//   u32 length      bytes after this field (header rest + payload), big endian
//   u64 call        the caller's number for the call; a reply carries it back
//   u8  kind        kRequest or kReply
//   u16 method      what the payload is (rpc.fbs)
//   payload         a FlatBuffers table of rpc.fbs
#pragma once

#include <cstddef>
#include <cstdint>

namespace magnetar::cluster::rpc {

inline constexpr size_t kLengthBytes = 4;
inline constexpr size_t kHeaderBytes = kLengthBytes + 8 + 1 + 2;
// A peer that announces a larger frame is broken or hostile: the channel closes.
inline constexpr uint32_t kMaxFrameBytes = 16u << 20;

enum class Kind : uint8_t { kRequest = 1, kReply = 2 };

enum class Method : uint16_t {
  kMetadata = 1,  // MetadataCall -> MetadataReply
  kJoin = 2,      // JoinCall -> JoinReply
  kKeepAlive = 3, // KeepAlive -> KeepAliveReply
  // Calls of the layers above (broker::RemoteCalls); their payloads are defined where they are handled.
  kKafkaGroupOffset = 100,  // protocol/kafka/server/group_offsets.h
  kAmqpPublish = 110,       // protocol/amqp/server/forwarding.h
  kAmqpQueueTopic = 111,    // protocol/amqp/server/forwarding.h
  kAmqpConsumeOpen = 112,   // protocol/amqp/server/remote_consumers.h
  kAmqpConsumerOp = 113,    // protocol/amqp/server/remote_consumers.h
  kAmqpDeliveries = 114,    // protocol/amqp/server/remote_consumers.h
  // The storage protocol: replication/transport.h, payloads in replication.fbs.
  kStorageAdd = 120,
  kStorageRead = 121,
  kStorageFence = 122,
  kStorageDelete = 123,
  kReleaseBundle = 130,     // broker/bundle_ownership.h
  kSplitBundle = 131,       // broker/bundle_ownership.h
};

}  // namespace magnetar::cluster::rpc
