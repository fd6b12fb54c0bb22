#include "protocol/amqp/properties.h"

#include <fmt/format.h>

namespace magnetar::protocol::amqp {

namespace {

// Flag bits, in wire order.
enum : uint16_t {
  kContentType = 1u << 15,
  kContentEncoding = 1u << 14,
  kHeaders = 1u << 13,
  kDeliveryMode = 1u << 12,
  kPriority = 1u << 11,
  kCorrelationId = 1u << 10,
  kReplyTo = 1u << 9,
  kExpiration = 1u << 8,
  kMessageId = 1u << 7,
  kTimestamp = 1u << 6,
  kType = 1u << 5,
  kUserId = 1u << 4,
  kAppId = 1u << 3,
  kClusterId = 1u << 2,
};

BasicProperties read_properties(WireReader& in) {
  BasicProperties p;
  const uint16_t flags = in.u16();
  if (flags & 1u) {
    in.fail("property flags announce a second flags word, which class basic does not have");
    return p;
  }
  if (flags & 2u) {
    in.fail("property flags set an unused bit");
    return p;
  }
  if (flags & kContentType) p.content_type = in.shortstr();
  if (flags & kContentEncoding) p.content_encoding = in.shortstr();
  if (flags & kHeaders) p.headers = in.table();
  if (flags & kDeliveryMode) p.delivery_mode = in.u8();
  if (flags & kPriority) p.priority = in.u8();
  if (flags & kCorrelationId) p.correlation_id = in.shortstr();
  if (flags & kReplyTo) p.reply_to = in.shortstr();
  if (flags & kExpiration) p.expiration = in.shortstr();
  if (flags & kMessageId) p.message_id = in.shortstr();
  if (flags & kTimestamp) p.timestamp = in.u64();
  if (flags & kType) p.type = in.shortstr();
  if (flags & kUserId) p.user_id = in.shortstr();
  if (flags & kAppId) p.app_id = in.shortstr();
  if (flags & kClusterId) p.cluster_id = in.shortstr();
  return p;
}

}  // namespace

common::Result<ContentHeader> decode_content_header(const common::Slice& payload) {
  WireReader in(payload);
  ContentHeader h;
  h.class_id = in.u16();
  in.u16();  // weight
  h.body_size = in.u64();
  const size_t start = in.position();
  if (in.ok() && h.class_id != 60) in.fail(fmt::format("a content header of class {}, not basic", h.class_id));
  h.properties = read_properties(in);
  if (!in.ok()) return common::Status::invalid_argument("malformed content header: " + in.status().message());
  if (in.remaining() != 0) {
    return common::Status::invalid_argument(fmt::format("{} bytes after a content header's properties", in.remaining()));
  }
  h.raw_properties = payload.sub(start);
  return h;
}

common::Result<BasicProperties> decode_properties(const common::Slice& raw) {
  WireReader in(raw);
  BasicProperties p = read_properties(in);
  if (!in.ok()) return common::Status::invalid_argument("malformed properties: " + in.status().message());
  if (in.remaining() != 0) return common::Status::invalid_argument("bytes after the properties");
  return p;
}

void encode_properties(WireWriter& out, const BasicProperties& p) {
  uint16_t flags = 0;
  if (p.content_type) flags |= kContentType;
  if (p.content_encoding) flags |= kContentEncoding;
  if (p.headers) flags |= kHeaders;
  if (p.delivery_mode) flags |= kDeliveryMode;
  if (p.priority) flags |= kPriority;
  if (p.correlation_id) flags |= kCorrelationId;
  if (p.reply_to) flags |= kReplyTo;
  if (p.expiration) flags |= kExpiration;
  if (p.message_id) flags |= kMessageId;
  if (p.timestamp) flags |= kTimestamp;
  if (p.type) flags |= kType;
  if (p.user_id) flags |= kUserId;
  if (p.app_id) flags |= kAppId;
  if (p.cluster_id) flags |= kClusterId;
  out.u16(flags);
  if (p.content_type) out.shortstr(*p.content_type);
  if (p.content_encoding) out.shortstr(*p.content_encoding);
  if (p.headers) out.table(*p.headers);
  if (p.delivery_mode) out.u8(*p.delivery_mode);
  if (p.priority) out.u8(*p.priority);
  if (p.correlation_id) out.shortstr(*p.correlation_id);
  if (p.reply_to) out.shortstr(*p.reply_to);
  if (p.expiration) out.shortstr(*p.expiration);
  if (p.message_id) out.shortstr(*p.message_id);
  if (p.timestamp) out.u64(*p.timestamp);
  if (p.type) out.shortstr(*p.type);
  if (p.user_id) out.shortstr(*p.user_id);
  if (p.app_id) out.shortstr(*p.app_id);
  if (p.cluster_id) out.shortstr(*p.cluster_id);
}

void encode_content_header(WireWriter& out, uint64_t body_size, std::string_view raw_properties) {
  out.u16(60);
  out.u16(0);
  out.u64(body_size);
  out.raw(raw_properties);
}

}  // namespace magnetar::protocol::amqp
