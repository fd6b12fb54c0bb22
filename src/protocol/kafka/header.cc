#include "protocol/kafka/header.h"

namespace magnetar::protocol::kafka {

RequestHeader peek_request_header(WireReader& in) {
  RequestHeader h;
  h.api_key = in.i16();
  h.api_version = in.i16();
  h.correlation_id = in.i32();
  return h;
}

void read_request_header_rest(WireReader& in, RequestHeader* header, int header_version) {
  header->client_id = in.string(false);
  if (header_version >= 2) in.skip_tagged_fields();
}

void begin_response(WireWriter& out, int32_t correlation_id, int header_version) {
  out.i32(0);  // size, patched by finish_response
  out.i32(correlation_id);
  if (header_version >= 1) out.empty_tagged_fields();
}

common::Slice finish_response(WireWriter& out) {
  out.patch_i32(0, static_cast<int32_t>(out.size() - kSizePrefixBytes));
  return out.finish();
}

void begin_request(WireWriter& out, const RequestHeader& header, int header_version) {
  out.i32(0);
  out.i16(header.api_key);
  out.i16(header.api_version);
  out.i32(header.correlation_id);
  out.string(header.client_id ? std::optional<std::string_view>(*header.client_id) : std::nullopt, false);
  if (header_version >= 2) out.empty_tagged_fields();
}

}  // namespace magnetar::protocol::kafka
